#include <dnnl.hpp>
#include <memory>
#include <stdexcept>

#include "dpt/core/cpu_features.h"
#include "dpt/ops/cpu/dnnl_context.h"
#include "dpt/ops/cpu/kernels.h"
#include "dpt/ops/cpu/layout.h"
#include "dpt/ops/precision.h"

namespace dpt::ops::cpu {

namespace {
using tag = dnnl::memory::format_tag;
using dnnl::convolution_backward_data;
using dnnl::convolution_backward_weights;
using dnnl::convolution_forward;

// Our single-channel kernels (single_channel_conv.cc) replace oneDNN's for shapes they fit,
// where the activations are channels-last (AVX-512), in fp32 also under --precision bf16
// (see ops/precision.h).
bool runs_single_channel_kernel(const Shape& x, const Shape& weight, ConvGeometry g) {
  return cpu_has_avx512f() && single_channel_conv_fits(x, weight, g) && conv_activation_tag(1, weight[0]) == tag::nhwc;
}

// Our backward-data kernel (scatter_backward_data.cc) replaces oneDNN's where it fits and
// the activations are channels-last, in fp32 (under --precision bf16 oneDNN's bf16 kernel
// does half the work).
bool runs_scatter_backward_data(const Shape& x, const Shape& weight, ConvGeometry g) {
  return cpu_has_avx512f() && scatter_backward_data_fits(x, weight, g) &&
         conv_activation_tag(x[1], weight[0]) == tag::nhwc &&
         conv_precision() == ConvPrecision::fp32;
}

// Winograd where ops/precision.h asks for it and oneDNN's F(4x4, 3x3) kernels fit: fp32,
// 3x3, stride 1, padding 1, 16-channel blocks (AVX-512; a test forcing another layout gets
// direct). Each primitive falls back to direct where oneDNN has no Winograd kernel for it
// (primitive_with_fallback), so the algorithm depends on the shapes alone, never on timing:
// every run, device count and process computes a shape the same way.
dnnl::algorithm conv_algorithm_for(const Shape& x, const Shape& weight, ConvGeometry g) {
  const tag activations = conv_activation_tag(x[1], weight[0]);
  const bool fits = cpu_has_avx512f() && weight[2] == 3 && weight[3] == 3 && g.stride == 1 && g.padding == 1 &&
                    x[1] % 16 == 0 && weight[0] % 16 == 0 && (activations == tag::any || activations == tag::nChw16c);
  return conv_algorithm() == ConvAlgorithm::winograd && conv_precision() == ConvPrecision::fp32 && fits
             ? dnnl::algorithm::convolution_winograd
             : dnnl::algorithm::convolution_direct;
}

// make(algorithm) builds a primitive; Winograd's refusal (dnnl::error) falls back to direct.
template <class Make>
auto primitive_with_fallback(dnnl::algorithm algorithm, Make&& make) {
  if (algorithm == dnnl::algorithm::convolution_winograd) {
    try {
      return make(algorithm);
    } catch (const dnnl::error&) {
    }
  }
  return make(dnnl::algorithm::convolution_direct);
}

// The layouts tensors have between ops.
struct PlainDescs {
  dnnl::memory::desc x, weight, bias, out;
};
PlainDescs plain_descs(const Shape& x, const Shape& weight, const Shape& out) {
  return {plain_desc(x, tag::nchw), plain_desc(weight, tag::oihw), plain_desc({weight[0]}, tag::x),
          plain_desc(out, tag::nchw)};
}
// The pass a primitive computes. Under --precision bf16 each pass reads the two tensors it
// multiplies as bf16: the forward x and the weight, backward-data the upstream gradient
// (the output's) and the weight, backward-weights the upstream gradient and x. What a pass
// writes, and the bias, stay f32.
enum class Pass { forward, backward_data, backward_weights };

// The layouts the primitives run in: the weights' is the primitive's choice ("any"); the
// activations' is conv_activation_tag's (nhwc, or "any" for the blocked layout oneDNN picks).
PlainDescs any_descs(const Shape& x, const Shape& weight, const Shape& out, Pass pass) {
  using type = dnnl::memory::data_type;
  const tag activations = conv_activation_tag(x[1], out[1]);
  const type low = conv_precision() == ConvPrecision::bf16 ? type::bf16 : type::f32;
  const auto desc = [](const Shape& shape, type t, tag layout) {
    return dnnl::memory::desc(to_dims(shape), t, layout);
  };
  return {desc(x, pass == Pass::backward_data ? type::f32 : low, activations),
          desc(weight, pass == Pass::backward_weights ? type::f32 : low, tag::any), plain_desc({weight[0]}, tag::x),
          desc(out, pass == Pass::forward ? type::f32 : low, activations)};
}

// The bias gradient: the per-channel sums of `grad` [N, C, H, W], always summed in the
// order of channels-last (a gradient in a layout other than that or a channel block is
// reordered first), so its bits do not
// depend on the layout the gradient arrived in: conv2d_relu's bias gradient equals that of
// relu(conv2d(...)) exactly. See channel_sums.cc for why this is not oneDNN's.
void bias_gradient(const Tensor& grad, const Tensor& sums) {
  // A gradient in the convolutions' channel block is summed in it (the same bits): no
  // reorder of an activation-sized tensor per convolution and step.
  const tag layout = activation_layout_of(grad);
  if (layout == tag::nChw8c || layout == tag::nChw16c) {
    sum_channels_blocked(static_cast<const float*>(grad.storage().raw_data()), grad.dim(0), grad.dim(2) * grad.dim(3),
                         grad.dim(1), layout == tag::nChw8c ? 8 : 16, sums.data<float>());
    return;
  }
  Tensor scratch;
  sum_channels_last(channels_last_data(grad, scratch), grad.dim(0) * grad.dim(2) * grad.dim(3), grad.dim(1),
                    sums.data<float>());
}

struct ConvForward {
  convolution_forward::primitive_desc pd;
  convolution_forward primitive;
};

// The forward primitive descriptor doubles as the hint that backward primitives need (the
// plain one: a ReLU post-op changes nothing the backward passes see).
const ConvForward& forward_primitive(const Shape& x, const Shape& weight, const Shape& out, bool with_bias,
                                     ConvGeometry g, bool fuse_relu = false) {
  const dnnl::algorithm algorithm = conv_algorithm_for(x, weight, g);
  const std::string key = cache_key("conv_fwd", x, weight, out, with_bias, g.stride, g.padding, fuse_relu,
                                    static_cast<int>(conv_precision()),
                                    static_cast<int>(conv_activation_tag(x[1], out[1])), static_cast<int>(algorithm));
  return cached<ConvForward>(key, [&] {
    return primitive_with_fallback(algorithm, [&](dnnl::algorithm a) {
      const PlainDescs d = any_descs(x, weight, out, Pass::forward);
      const dnnl::memory::dims strides{g.stride, g.stride}, padding{g.padding, g.padding};
      const auto desc = with_bias ? convolution_forward::desc(dnnl::prop_kind::forward_training, a, d.x, d.weight,
                                                              d.bias, d.out, strides, padding, padding)
                                  : convolution_forward::desc(dnnl::prop_kind::forward_training, a, d.x, d.weight,
                                                              d.out, strides, padding, padding);
      dnnl::primitive_attr attr;
      if (fuse_relu) {
        dnnl::post_ops relu;
        relu.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
        attr.set_post_ops(relu);
      }
      convolution_forward::primitive_desc pd(desc, attr, engine());
      return ConvForward{pd, convolution_forward(pd)};
    });
  });
}

// A backward pass's primitive (convolution_backward_data or _weights, whose descriptors
// take the same arguments), built against the forward's as its hint.
template <class Primitive>
struct ConvBackward {
  typename Primitive::primitive_desc pd;
  Primitive primitive;
};
template <class Primitive>
const ConvBackward<Primitive>& backward_primitive(const char* op, Pass pass, const Shape& x, const Shape& weight,
                                                  const Shape& out, ConvGeometry g) {
  const dnnl::algorithm algorithm = conv_algorithm_for(x, weight, g);
  const std::string key = cache_key(op, x, weight, out, g.stride, g.padding, static_cast<int>(conv_precision()),
                                    static_cast<int>(conv_activation_tag(x[1], weight[0])), static_cast<int>(algorithm));
  return cached<ConvBackward<Primitive>>(key, [&] {
    const auto& hint = forward_primitive(x, weight, out, false, g).pd;
    return primitive_with_fallback(algorithm, [&](dnnl::algorithm a) {
      const PlainDescs d = any_descs(x, weight, out, pass);
      const dnnl::memory::dims strides{g.stride, g.stride}, padding{g.padding, g.padding};
      const typename Primitive::desc desc(a, d.x, d.weight, d.out, strides, padding, padding);
      typename Primitive::primitive_desc pd(desc, engine(), hint);
      return ConvBackward<Primitive>{pd, Primitive(pd)};
    });
  });
}
const ConvBackward<convolution_backward_data>& backward_data_primitive(const Shape& x, const Shape& weight,
                                                                       const Shape& out, ConvGeometry g) {
  return backward_primitive<convolution_backward_data>("conv_bwd_data", Pass::backward_data, x, weight, out, g);
}
const ConvBackward<convolution_backward_weights>& backward_weights_primitive(const Shape& x, const Shape& weight,
                                                                             const Shape& out, ConvGeometry g) {
  return backward_primitive<convolution_backward_weights>("conv_bwd_weights", Pass::backward_weights, x, weight, out,
                                                          g);
}
}  // namespace

ConvImplementations conv2d_implementations(const Shape& x, const Shape& weight, const Shape& out, ConvGeometry g) {
  return {forward_primitive(x, weight, out, false, g).pd.impl_info_str(),
          backward_data_primitive(x, weight, out, g).pd.impl_info_str(),
          backward_weights_primitive(x, weight, out, g).pd.impl_info_str()};
}

Tensor conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvGeometry g, const Shape& out_shape,
                      bool fuse_relu) {
  const PlainDescs plain = plain_descs(x.shape(), weight.shape(), out_shape);
  if (runs_single_channel_kernel(x.shape(), weight.shape(), g)) {
    const LaidOutTensor out = channels_last_output(out_shape);
    single_channel_conv_forward(x.data<float>(), x.shape(), weight.data<float>(), weight.shape(),
                                bias.defined() ? bias.data<float>() : nullptr, fuse_relu,
                                static_cast<float*>(out.memory.get_data_handle()));
    return out.tensor;
  }
  const bool with_bias = bias.defined();
  const ConvForward& prim = forward_primitive(x.shape(), weight.shape(), out_shape, with_bias, g, fuse_relu);
  const LaidOutTensor out = output_in_layout(out_shape, plain.out, prim.pd.dst_desc());
  Tensor x_scratch, w_scratch;
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, input_in_layout(x, plain.x, prim.pd.src_desc(), x_scratch)},
      {DNNL_ARG_WEIGHTS, input_in_layout(weight, plain.weight, prim.pd.weights_desc(), w_scratch)},
      {DNNL_ARG_DST, out.memory}};
  if (with_bias) args.insert({DNNL_ARG_BIAS, as_memory(plain.bias, bias)});
  prim.primitive.execute(stream(), args);
  stream().wait();
  return out.tensor;
}

Tensor conv2d_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape, ConvGeometry g) {
  if (runs_scatter_backward_data(x_shape, weight.shape(), g)) {
    const LaidOutTensor grad_x = channels_last_output(x_shape);
    Tensor dy_scratch;
    scatter_backward_data(channels_last_data(grad_out, dy_scratch), grad_out.shape(), weight.data<float>(),
                          weight.shape(), x_shape, static_cast<float*>(grad_x.memory.get_data_handle()));
    return grad_x.tensor;
  }
  const auto& prim = backward_data_primitive(x_shape, weight.shape(), grad_out.shape(), g);
  const PlainDescs plain = plain_descs(x_shape, weight.shape(), grad_out.shape());
  const LaidOutTensor grad_x = output_in_layout(x_shape, plain.x, prim.pd.diff_src_desc());
  Tensor dy_scratch, w_scratch;
  prim.primitive.execute(
      stream(), {{DNNL_ARG_DIFF_DST, input_in_layout(grad_out, plain.out, prim.pd.diff_dst_desc(), dy_scratch)},
                 {DNNL_ARG_WEIGHTS, input_in_layout(weight, plain.weight, prim.pd.weights_desc(), w_scratch)},
                 {DNNL_ARG_DIFF_SRC, grad_x.memory}});
  stream().wait();
  return grad_x.tensor;
}

PoolResult conv2d_relu_avg_pool_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvGeometry g,
                                        int pool, const Shape& out_shape, bool for_backward) {
  if (!runs_single_channel_kernel(x.shape(), weight.shape(), g)) return {};
  const LaidOutTensor out = channels_last_output(out_shape);
  // The masks, 4 bytes each, in a tensor's storage: from the caching allocator, freed with
  // the autograd graph.
  std::shared_ptr<Tensor> masks;
  if (for_backward)
    masks = std::make_shared<Tensor>(Tensor::empty({x.dim(0), out_shape[2] * pool, out_shape[3] * pool}));
  single_channel_conv_relu_avg_pool_forward(x.data<float>(), x.shape(), weight.data<float>(), weight.shape(),
                                            bias.defined() ? bias.data<float>() : nullptr, pool, out_shape,
                                            static_cast<float*>(out.memory.get_data_handle()),
                                            masks ? reinterpret_cast<uint32_t*>(masks->data<float>()) : nullptr);
  return {out.tensor, masks};
}

void conv2d_relu_avg_pool_weight_grads(const Tensor& grad_pooled, const PoolResult& forward, int pool, const Tensor& x,
                                       ConvGeometry /*g*/, const Tensor& grad_weight, const Tensor& grad_bias) {
  const auto* masks = static_cast<const Tensor*>(forward.workspace.get());
  if (!masks) throw std::logic_error("conv2d_relu_avg_pool_weight_grads: the forward kept no ReLU masks");
  Tensor dp_scratch;
  single_channel_conv_relu_avg_pool_weight_grads(
      x.data<float>(), x.shape(), reinterpret_cast<const uint32_t*>(masks->data<float>()),
      channels_last_data(grad_pooled, dp_scratch), grad_pooled.shape(), pool, grad_weight.data<float>(),
      grad_weight.shape(), grad_bias.defined() ? grad_bias.data<float>() : nullptr);
}

void conv2d_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                             const Tensor& grad_bias, ConvGeometry g) {
  const PlainDescs plain = plain_descs(x.shape(), grad_weight.shape(), grad_out.shape());
  if (grad_bias.defined()) bias_gradient(grad_out, grad_bias);
  const auto& prim = backward_weights_primitive(x.shape(), grad_weight.shape(), grad_out.shape(), g);
  Tensor dy_scratch, x_scratch, dw_scratch;
  const dnnl::memory dw_mem = scratch_output(grad_weight, plain.weight, prim.pd.diff_weights_desc(), dw_scratch);
  prim.primitive.execute(
      stream(), {{DNNL_ARG_DIFF_DST, input_in_layout(grad_out, plain.out, prim.pd.diff_dst_desc(), dy_scratch)},
                 {DNNL_ARG_SRC, input_in_layout(x, plain.x, prim.pd.src_desc(), x_scratch)},
                 {DNNL_ARG_DIFF_WEIGHTS, dw_mem}});
  finish_output(dw_mem, grad_weight, plain.weight);
  stream().wait();
}

}  // namespace dpt::ops::cpu
