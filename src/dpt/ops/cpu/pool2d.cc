#include <dnnl.hpp>

#include "dpt/ops/cpu/dnnl_context.h"
#include "dpt/ops/adaptive_bins.h"
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

// A window of kernel_h x kernel_w moved by stride_h, stride_w (square for pool2d, the whole
// plane for the global pool).
struct Window {
  int64_t kernel_h, kernel_w, stride_h, stride_w;
};
Window square_window(int kernel, int stride) { return {kernel, kernel, stride, stride}; }

struct PoolForward {
  pooling_forward::primitive_desc pd;
  pooling_forward primitive;
};

// Pooling runs in the layout of its input when that is channels-last (after an nhwc
// convolution), else in the convolutions' channel block; either way with no reorder.
tag pool_tag(const Tensor& x) {
  return is_channels_last(current_layout(x, plain_desc(x.shape(), tag::nchw))) ? tag::nhwc : blocked_activation_tag();
}

const PoolForward& forward_primitive(const Shape& x, const Shape& out, PoolKind kind, const Window& w, tag layout) {
  const std::string key = cache_key("pool_fwd", x, out, static_cast<int>(kind), w.kernel_h, w.kernel_w, w.stride_h,
                                    w.stride_w, static_cast<int>(layout));
  return cached<PoolForward>(key, [&] {
    const pooling_forward::desc desc(dnnl::prop_kind::forward_training, pool_algorithm(kind), plain_desc(x, layout),
                                     plain_desc(out, layout), {w.stride_h, w.stride_w}, {w.kernel_h, w.kernel_w},
                                     {0, 0}, {0, 0});
    pooling_forward::primitive_desc pd(desc, engine());
    return PoolForward{pd, pooling_forward(pd)};
  });
}

PoolResult pool_forward(const Tensor& x, PoolKind kind, const Window& window, const Shape& out_shape) {
  const tag layout = pool_tag(x);
  const PoolForward& prim = forward_primitive(x.shape(), out_shape, kind, window, layout);
  const LaidOutTensor out = output_in_layout(out_shape, plain_desc(out_shape, tag::nchw), prim.pd.dst_desc());
  PoolResult result{out.tensor, nullptr, static_cast<int>(layout)};
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

Tensor pool_backward(const Tensor& grad_out, const PoolResult& forward, PoolKind kind, const Window& window,
                     const Shape& x_shape) {
  struct Primitive {
    pooling_backward::primitive_desc pd;
    pooling_backward primitive;
  };
  const Window& w = window;
  // The layout the forward pass ran in (its workspace, for max pooling, is in that layout).
  const tag layout = forward.layout != 0 ? static_cast<tag>(forward.layout) : blocked_activation_tag();
  const std::string key = cache_key("pool_bwd", x_shape, grad_out.shape(), static_cast<int>(kind), w.kernel_h,
                                    w.kernel_w, w.stride_h, w.stride_w, static_cast<int>(layout));
  auto& prim = cached<Primitive>(key, [&] {
    const pooling_backward::desc desc(pool_algorithm(kind), plain_desc(x_shape, layout),
                                      plain_desc(grad_out.shape(), layout), {w.stride_h, w.stride_w},
                                      {w.kernel_h, w.kernel_w}, {0, 0}, {0, 0});
    pooling_backward::primitive_desc pd(desc, engine(),
                                        forward_primitive(x_shape, grad_out.shape(), kind, w, layout).pd);
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
}  // namespace

PoolResult pool2d_forward(const Tensor& x, PoolKind kind, int kernel, int stride, const Shape& out_shape) {
  return pool_forward(x, kind, square_window(kernel, stride), out_shape);
}

Tensor pool2d_backward(const Tensor& grad_out, const PoolResult& forward, PoolKind kind, int kernel, int stride,
                       const Shape& x_shape) {
  return pool_backward(grad_out, forward, kind, square_window(kernel, stride), x_shape);
}

Tensor global_avg_pool2d_forward(const Tensor& x) {
  const Window plane{x.dim(2), x.dim(3), x.dim(2), x.dim(3)};
  return pool_forward(x, PoolKind::avg, plane, {x.dim(0), x.dim(1), 1, 1}).out;
}

Tensor global_avg_pool2d_backward(const Tensor& grad_out, const Shape& x_shape) {
  const Window plane{x_shape[2], x_shape[3], x_shape[2], x_shape[3]};
  return pool_backward(grad_out, PoolResult{}, PoolKind::avg, plane, x_shape);
}

// Adaptive pooling's bins: plain loops over plain tensors (the bins overlap or differ in
// size, which oneDNN's pooling does not express); the output is small.
Tensor adaptive_avg_pool2d_forward(const Tensor& x, int64_t out_h, int64_t out_w) {
  const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
  Tensor out = Tensor::empty({x.dim(0), x.dim(1), out_h, out_w}, DType::f32, x.device());
  const float* in = x.data<float>();
  float* o = out.data<float>();
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t i = 0; i < out_h; ++i) {
      const AdaptiveBin rows = adaptive_bin(i, h, out_h);
      for (int64_t j = 0; j < out_w; ++j) {
        const AdaptiveBin cols = adaptive_bin(j, w, out_w);
        float sum = 0.0f;
        for (int64_t r = rows.begin; r < rows.end; ++r)
          for (int64_t c = cols.begin; c < cols.end; ++c) sum += in[(p * h + r) * w + c];
        o[(p * out_h + i) * out_w + j] = sum / static_cast<float>(rows.size() * cols.size());
      }
    }
  }
  return out;
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& x_shape) {
  const int64_t planes = x_shape[0] * x_shape[1], h = x_shape[2], w = x_shape[3];
  const int64_t out_h = grad_out.dim(2), out_w = grad_out.dim(3);
  Tensor grad = Tensor::zeros(x_shape, DType::f32, grad_out.device());
  const float* g = grad_out.data<float>();
  float* gx = grad.data<float>();
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t i = 0; i < out_h; ++i) {
      const AdaptiveBin rows = adaptive_bin(i, h, out_h);
      for (int64_t j = 0; j < out_w; ++j) {
        const AdaptiveBin cols = adaptive_bin(j, w, out_w);
        const float share = g[(p * out_h + i) * out_w + j] / static_cast<float>(rows.size() * cols.size());
        for (int64_t r = rows.begin; r < rows.end; ++r)
          for (int64_t c = cols.begin; c < cols.end; ++c) gx[(p * h + r) * w + c] += share;
      }
    }
  }
  return grad;
}

}  // namespace dpt::ops::cpu
