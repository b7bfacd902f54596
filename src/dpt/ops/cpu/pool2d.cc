#include <dnnl.hpp>

#include "dpt/ops/cpu/dnnl_context.h"
#include "dpt/ops/cpu/kernels.h"
#include "dpt/ops/cpu/layout.h"

namespace dpt::ops::cpu {

namespace {
using tag = dnnl::memory::format_tag;
using dnnl::pooling_backward;
using dnnl::pooling_forward;

dnnl::algorithm pool_algorithm(PoolKind kind) {
  // No padding is ever used, so including or excluding it gives the same average.
  return kind == PoolKind::max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
}

struct PoolForward {
  pooling_forward::primitive_desc pd;
  pooling_forward primitive;
};

const PoolForward& forward_primitive(const Shape& x, const Shape& out, PoolKind kind, int kernel, int stride) {
  const std::string key = cache_key("pool_fwd", x, out, static_cast<int>(kind), kernel, stride);
  return cached<PoolForward>(key, [&] {
    const pooling_forward::desc desc(dnnl::prop_kind::forward_training, pool_algorithm(kind),
                                     plain_desc(x, blocked_activation_tag()),
                                     plain_desc(out, blocked_activation_tag()), {stride, stride},
                                     {kernel, kernel}, {0, 0}, {0, 0});
    pooling_forward::primitive_desc pd(desc, engine());
    return PoolForward{pd, pooling_forward(pd)};
  });
}
}  // namespace

PoolResult pool2d_forward(const Tensor& x, PoolKind kind, int kernel, int stride, const Shape& out_shape) {
  const PoolForward& prim = forward_primitive(x.shape(), out_shape, kind, kernel, stride);
  const LaidOutTensor out = output_in_layout(out_shape, plain_desc(out_shape, tag::nchw), prim.pd.dst_desc());
  PoolResult result{out.tensor, nullptr};
  Tensor x_scratch;
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, input_in_layout(x, plain_desc(x.shape(), tag::nchw), prim.pd.src_desc(), x_scratch)},
      {DNNL_ARG_DST, out.memory}};
  if (kind == PoolKind::max) {
    auto workspace = std::make_shared<dnnl::memory>(prim.pd.workspace_desc(), engine());
    args.insert({DNNL_ARG_WORKSPACE, *workspace});
    result.workspace = workspace;
  }
  prim.primitive.execute(stream(), args);
  stream().wait();
  return result;
}

Tensor pool2d_backward(const Tensor& grad_out, const PoolResult& forward, PoolKind kind, int kernel, int stride,
                       const Shape& x_shape) {
  struct Primitive {
    pooling_backward::primitive_desc pd;
    pooling_backward primitive;
  };
  const std::string key = cache_key("pool_bwd", x_shape, grad_out.shape(), static_cast<int>(kind), kernel, stride);
  auto& prim = cached<Primitive>(key, [&] {
    const pooling_backward::desc desc(pool_algorithm(kind), plain_desc(x_shape, blocked_activation_tag()),
                                      plain_desc(grad_out.shape(), blocked_activation_tag()), {stride, stride},
                                      {kernel, kernel},
                                      {0, 0}, {0, 0});
    pooling_backward::primitive_desc pd(desc, engine(),
                                        forward_primitive(x_shape, grad_out.shape(), kind, kernel, stride).pd);
    return Primitive{pd, pooling_backward(pd)};
  });
  const LaidOutTensor grad_x = output_in_layout(x_shape, plain_desc(x_shape, tag::nchw), prim.pd.diff_src_desc());
  Tensor dy_scratch;
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_DIFF_DST,
       input_in_layout(grad_out, plain_desc(grad_out.shape(), tag::nchw), prim.pd.diff_dst_desc(), dy_scratch)},
      {DNNL_ARG_DIFF_SRC, grad_x.memory}};
  if (kind == PoolKind::max) args.insert({DNNL_ARG_WORKSPACE, *static_cast<dnnl::memory*>(forward.workspace.get())});
  prim.primitive.execute(stream(), args);
  stream().wait();
  return grad_x.tensor;
}

}  // namespace dpt::ops::cpu
