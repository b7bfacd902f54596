#include <dnnl.hpp>

#include "dpt/ops/cpu/dnnl_context.h"
#include "dpt/ops/cpu/kernels.h"
#include "dpt/ops/cpu/layout.h"

namespace dpt::ops::cpu {

namespace {
// Elementwise ops see a tensor as one flat array, except a 4-D activation that a kernel
// left in a blocked layout: relu runs in that layout, so the next kernel gets it as is.
dnnl::memory::desc plain_layout(const Tensor& t) {
  return t.ndim() == 4 ? plain_desc(t.shape(), dnnl::memory::format_tag::nchw)
                       : plain_desc({t.numel()}, dnnl::memory::format_tag::a);
}

struct ReluForward {
  dnnl::eltwise_forward::primitive_desc pd;
  dnnl::eltwise_forward primitive;
};

const ReluForward& forward_primitive(const dnnl::memory::desc& data) {
  return cached<ReluForward>(cache_key("relu_fwd", layout_key(data)), [&] {
    const dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu, data,
                                           0.0f);
    dnnl::eltwise_forward::primitive_desc pd(desc, engine());
    return ReluForward{pd, dnnl::eltwise_forward(pd)};
  });
}
}  // namespace

Tensor relu_forward(const Tensor& x) {
  const dnnl::memory::desc plain = plain_layout(x);
  const dnnl::memory::desc layout = current_layout(x, plain);
  Tensor unused;
  const dnnl::memory src = input_in_layout(x, plain, layout, unused);
  const LaidOutTensor out = output_in_layout(x.shape(), plain, layout);
  forward_primitive(layout).primitive.execute(stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, out.memory}});
  stream().wait();
  return out.tensor;
}

Tensor relu_backward(const Tensor& grad_out, const Tensor& x) {
  struct Primitive {
    dnnl::eltwise_backward::primitive_desc pd;
    dnnl::eltwise_backward primitive;
  };
  const dnnl::memory::desc plain = plain_layout(x);
  const dnnl::memory::desc layout = current_layout(x, plain);
  auto& prim = cached<Primitive>(cache_key("relu_bwd", layout_key(layout)), [&] {
    const dnnl::eltwise_backward::desc desc(dnnl::algorithm::eltwise_relu, layout, layout, 0.0f);
    dnnl::eltwise_backward::primitive_desc pd(desc, engine(), forward_primitive(layout).pd);
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
