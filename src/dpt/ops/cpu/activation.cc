#include <dnnl.hpp>

#include <string>

#include "dpt/ops/cpu/dnnl_context.h"
#include "dpt/ops/cpu/kernels.h"
#include "dpt/ops/cpu/layout.h"

namespace dpt::ops::cpu {

namespace {
// Elementwise ops see a tensor as one flat array, except a 4-D activation that a kernel
// left in a blocked layout: the activation runs in that layout, so the next kernel gets
// it as is.
dnnl::memory::desc plain_layout(const Tensor& t) {
  return t.ndim() == 4 ? plain_desc(t.shape(), dnnl::memory::format_tag::nchw)
                       : plain_desc({t.numel()}, dnnl::memory::format_tag::a);
}

dnnl::algorithm algorithm(Activation a) {
  switch (a) {
    case Activation::relu: return dnnl::algorithm::eltwise_relu;
    case Activation::sigmoid: return dnnl::algorithm::eltwise_logistic;
    case Activation::tanh: return dnnl::algorithm::eltwise_tanh;
    case Activation::gelu: return dnnl::algorithm::eltwise_gelu_erf;
  }
  return dnnl::algorithm::eltwise_relu;
}

struct ActivationForward {
  dnnl::eltwise_forward::primitive_desc pd;
  dnnl::eltwise_forward primitive;
};

const ActivationForward& forward_primitive(const dnnl::memory::desc& data, Activation a) {
  return cached<ActivationForward>(cache_key("activation_fwd", activation_name(a), layout_key(data)), [&] {
    const dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_training, algorithm(a), data, 0.0f);
    dnnl::eltwise_forward::primitive_desc pd(desc, engine());
    return ActivationForward{pd, dnnl::eltwise_forward(pd)};
  });
}
}  // namespace

Tensor activation_forward(const Tensor& x, Activation a) {
  const dnnl::memory::desc plain = plain_layout(x);
  const dnnl::memory::desc layout = current_layout(x, plain);
  Tensor unused;
  const dnnl::memory src = input_in_layout(x, plain, layout, unused);
  const LaidOutTensor out = output_in_layout(x.shape(), plain, layout);
  forward_primitive(layout, a).primitive.execute(stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, out.memory}});
  stream().wait();
  return out.tensor;
}

// From the forward's input (oneDNN's src-based backward); relu's mask reads the same from
// its output.
Tensor activation_backward(const Tensor& grad_out, const Tensor& x, Activation a) {
  struct Primitive {
    dnnl::eltwise_backward::primitive_desc pd;
    dnnl::eltwise_backward primitive;
  };
  const dnnl::memory::desc plain = plain_layout(x);
  const dnnl::memory::desc layout = current_layout(x, plain);
  auto& prim = cached<Primitive>(cache_key("activation_bwd", activation_name(a), layout_key(layout)), [&] {
    const dnnl::eltwise_backward::desc desc(algorithm(a), layout, layout, 0.0f);
    dnnl::eltwise_backward::primitive_desc pd(desc, engine(), forward_primitive(layout, a).pd);
    return Primitive{pd, dnnl::eltwise_backward(pd)};
  });
  Tensor unused, dy_scratch;
  const dnnl::memory src = input_in_layout(x, plain, layout, unused);
  const dnnl::memory dy = input_in_layout(grad_out, plain, layout, dy_scratch);
  const LaidOutTensor grad_x = output_in_layout(x.shape(), plain, layout);
  prim.primitive.execute(stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_SRC, grad_x.memory}});
  stream().wait();
  return grad_x.tensor;
}

}  // namespace dpt::ops::cpu
