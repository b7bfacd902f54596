#include <dnnl.hpp>

#include "dpt/ops/cpu/dnnl_context.h"
#include "dpt/ops/cpu/kernels.h"

namespace dpt::ops::cpu {

namespace {
using tag = dnnl::memory::format_tag;
using dnnl::convolution_backward_data;
using dnnl::convolution_backward_weights;
using dnnl::convolution_forward;

struct ConvPrimitives {
  convolution_forward::primitive_desc forward_pd;
  convolution_forward forward;
};

struct ConvDescs {
  dnnl::memory::desc x, weight, bias, out;
  dnnl::memory::dims strides, padding;
};

ConvDescs conv_descs(const Shape& x, const Shape& weight, const Shape& out, ConvGeometry g) {
  return {plain_desc(x, tag::nchw),
          plain_desc(weight, tag::oihw),
          plain_desc({weight[0]}, tag::x),
          plain_desc(out, tag::nchw),
          {g.stride, g.stride},
          {g.padding, g.padding}};
}

// The forward primitive descriptor doubles as the hint that backward primitives need.
const ConvPrimitives& forward_primitives(const Shape& x, const Shape& weight, const Shape& out, bool with_bias,
                                         ConvGeometry g) {
  const std::string key = cache_key("conv_fwd", x, weight, out, with_bias, g.stride, g.padding);
  return cached<ConvPrimitives>(key, [&] {
    const ConvDescs d = conv_descs(x, weight, out, g);
           const auto desc = with_bias ? convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                                   dnnl::algorithm::convolution_direct, d.x,
                                                                   d.weight, d.bias, d.out, d.strides, d.padding,
                                                                   d.padding)
                                       : convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                                   dnnl::algorithm::convolution_direct, d.x,
                                                                   d.weight, d.out, d.strides, d.padding,
                                                                   d.padding);
           convolution_forward::primitive_desc pd(desc, engine());
    return ConvPrimitives{pd, convolution_forward(pd)};
  });
}

const convolution_forward::primitive_desc& forward_pd(const Shape& x, const Shape& weight, const Shape& out,
                                                      bool with_bias, ConvGeometry g) {
  return forward_primitives(x, weight, out, with_bias, g).forward_pd;
}
}  // namespace

Tensor conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvGeometry g,
                      const Shape& out_shape) {
  const bool with_bias = bias.defined();
  const ConvPrimitives& prims = forward_primitives(x.shape(), weight.shape(), out_shape, with_bias, g);
  const ConvDescs d = conv_descs(x.shape(), weight.shape(), out_shape, g);
  Tensor out = Tensor::empty(out_shape, DType::f32, x.device());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, as_memory(d.x, x)},
                                             {DNNL_ARG_WEIGHTS, as_memory(d.weight, weight)},
                                             {DNNL_ARG_DST, as_memory(d.out, out)}};
  if (with_bias) args.insert({DNNL_ARG_BIAS, as_memory(d.bias, bias)});
  prims.forward.execute(stream(), args);
  stream().wait();
  return out;
}

Tensor conv2d_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape, ConvGeometry g) {
  struct Primitive {
    convolution_backward_data::primitive_desc pd;
    convolution_backward_data primitive;
  };
  const std::string key = cache_key("conv_bwd_data", x_shape, weight.shape(), grad_out.shape(), g.stride, g.padding);
  auto& prim = cached<Primitive>(key, [&] {
    const ConvDescs d = conv_descs(x_shape, weight.shape(), grad_out.shape(), g);
    const convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, d.x, d.weight, d.out, d.strides,
                                               d.padding, d.padding);
    convolution_backward_data::primitive_desc pd(
        desc, engine(), forward_pd(x_shape, weight.shape(), grad_out.shape(), false, g));
    return Primitive{pd, convolution_backward_data(pd)};
  });
  const ConvDescs d = conv_descs(x_shape, weight.shape(), grad_out.shape(), g);
  Tensor grad_x = Tensor::empty(x_shape, DType::f32, grad_out.device());
  prim.primitive.execute(stream(), {{DNNL_ARG_DIFF_DST, as_memory(d.out, grad_out)},
                                    {DNNL_ARG_WEIGHTS, as_memory(d.weight, weight)},
                                    {DNNL_ARG_DIFF_SRC, as_memory(d.x, grad_x)}});
  stream().wait();
  return grad_x;
}

void conv2d_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                             const Tensor& grad_bias, ConvGeometry g) {
  struct Primitive {
    convolution_backward_weights::primitive_desc pd;
    convolution_backward_weights primitive;
  };
  const bool with_bias = grad_bias.defined();
  const std::string key =
      cache_key("conv_bwd_weights", x.shape(), grad_weight.shape(), grad_out.shape(), with_bias, g.stride, g.padding);
  auto& prim = cached<Primitive>(key, [&] {
    const ConvDescs d = conv_descs(x.shape(), grad_weight.shape(), grad_out.shape(), g);
    const auto desc = with_bias ? convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, d.x,
                                                                     d.weight, d.bias, d.out, d.strides, d.padding,
                                                                     d.padding)
                                : convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, d.x,
                                                                     d.weight, d.out, d.strides, d.padding,
                                                                     d.padding);
    convolution_backward_weights::primitive_desc pd(
        desc, engine(), forward_pd(x.shape(), grad_weight.shape(), grad_out.shape(), with_bias, g));
    return Primitive{pd, convolution_backward_weights(pd)};
  });
  const ConvDescs d = conv_descs(x.shape(), grad_weight.shape(), grad_out.shape(), g);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, as_memory(d.out, grad_out)},
                                             {DNNL_ARG_SRC, as_memory(d.x, x)},
                                             {DNNL_ARG_DIFF_WEIGHTS, as_memory(d.weight, grad_weight)}};
  if (with_bias) args.insert({DNNL_ARG_DIFF_BIAS, as_memory(d.bias, grad_bias)});
  prim.primitive.execute(stream(), args);
  stream().wait();
}

}  // namespace dpt::ops::cpu
