#include <dnnl.hpp>

#include "dpt/ops/cpu/dnnl_context.h"
#include "dpt/ops/cpu/kernels.h"

namespace dpt::ops::cpu {

namespace {
// Elementwise ops see any tensor as one flat array.
dnnl::memory::desc flat_desc(const Tensor& t) { return plain_desc({t.numel()}, dnnl::memory::format_tag::a); }

struct ReluForward {
  dnnl::eltwise_forward::primitive_desc pd;
  dnnl::eltwise_forward primitive;
};

const ReluForward& forward_primitive(const Tensor& x) {
  return cached<ReluForward>(cache_key("relu_fwd", x.numel()), [&] {
    const dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu,
                                           flat_desc(x), 0.0f);
    dnnl::eltwise_forward::primitive_desc pd(desc, engine());
    return ReluForward{pd, dnnl::eltwise_forward(pd)};
  });
}
}  // namespace

Tensor relu_forward(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), DType::f32, x.device());
  const auto desc = flat_desc(x);
  forward_primitive(x).primitive.execute(stream(),
                                         {{DNNL_ARG_SRC, as_memory(desc, x)}, {DNNL_ARG_DST, as_memory(desc, out)}});
  stream().wait();
  return out;
}

Tensor relu_backward(const Tensor& grad_out, const Tensor& x) {
  struct Primitive {
    dnnl::eltwise_backward::primitive_desc pd;
    dnnl::eltwise_backward primitive;
  };
  auto& prim = cached<Primitive>(cache_key("relu_bwd", x.numel()), [&] {
    const dnnl::eltwise_backward::desc desc(dnnl::algorithm::eltwise_relu, flat_desc(x), flat_desc(x), 0.0f);
    dnnl::eltwise_backward::primitive_desc pd(desc, engine(), forward_primitive(x).pd);
    return Primitive{pd, dnnl::eltwise_backward(pd)};
  });
  Tensor grad_x = Tensor::empty(x.shape(), DType::f32, x.device());
  const auto desc = flat_desc(x);
  prim.primitive.execute(stream(), {{DNNL_ARG_SRC, as_memory(desc, x)},
                                    {DNNL_ARG_DIFF_DST, as_memory(desc, grad_out)},
                                    {DNNL_ARG_DIFF_SRC, as_memory(desc, grad_x)}});
  stream().wait();
  return grad_x;
}

}  // namespace dpt::ops::cpu
