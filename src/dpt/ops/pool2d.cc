#include "dpt/autograd/node.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/check.h"
#include "dpt/ops/ops.h"

namespace dpt::ops {

namespace {
Tensor pool2d(const Tensor& x, PoolKind kind, int kernel, int stride) {
  const std::string op = kind == PoolKind::max ? "max_pool2d" : "avg_pool2d";
  require_rank(x, 4, op, "input");
  require(kernel >= 1 && stride >= 1, op, "kernel and stride must be >= 1");
  require(x.dim(2) >= kernel && x.dim(3) >= kernel, op,
          "window " + std::to_string(kernel) + " is larger than the input " + shape_str(x.shape()));
  const Shape out_shape{x.dim(0), x.dim(1), (x.dim(2) - kernel) / stride + 1, (x.dim(3) - kernel) / stride + 1};

  PoolResult forward = backend_for(x).pool2d_forward(x, kind, kernel, stride, out_shape);
  Tensor out = forward.out;
  if (autograd::should_record({&x})) {
    forward.out = Tensor();  // backward needs only the workspace; never hold the output itself
    autograd::record(
        out, op, {&x},
        [forward, kind, kernel, stride, x_shape = x.shape()](const Tensor& grad_out) -> std::vector<Tensor> {
          return {backend_for(grad_out).pool2d_backward(grad_out, forward, kind, kernel, stride, x_shape)};
        });
  }
  return out;
}
}  // namespace

Tensor avg_pool2d(const Tensor& x, int kernel, int stride) { return pool2d(x, PoolKind::avg, kernel, stride); }
Tensor max_pool2d(const Tensor& x, int kernel, int stride) { return pool2d(x, PoolKind::max, kernel, stride); }

Tensor global_avg_pool2d(const Tensor& x) {
  const std::string op = "global_avg_pool2d";
  require_rank(x, 4, op, "input");
  require(x.dim(2) >= 1 && x.dim(3) >= 1, op, "input " + shape_str(x.shape()) + " has an empty plane");
  Tensor out = backend_for(x).global_avg_pool2d_forward(x);
  if (autograd::should_record({&x})) {
    autograd::record(out, op, {&x}, [x_shape = x.shape()](const Tensor& grad_out) -> std::vector<Tensor> {
      return {backend_for(grad_out).global_avg_pool2d_backward(grad_out, x_shape)};
    });
  }
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w) {
  const std::string op = "adaptive_avg_pool2d";
  require_rank(x, 4, op, "input");
  require(out_h >= 1 && out_w >= 1, op,
          "output size " + std::to_string(out_h) + "x" + std::to_string(out_w) + " must be at least 1x1");
  require(x.dim(2) >= 1 && x.dim(3) >= 1, op, "input " + shape_str(x.shape()) + " has an empty plane");
  if (out_h == 1 && out_w == 1) return global_avg_pool2d(x);
  Tensor out = backend_for(x).adaptive_avg_pool2d_forward(x, out_h, out_w);
  if (autograd::should_record({&x})) {
    autograd::record(out, op, {&x}, [x_shape = x.shape()](const Tensor& grad_out) -> std::vector<Tensor> {
      return {backend_for(grad_out).adaptive_avg_pool2d_backward(grad_out, x_shape)};
    });
  }
  return out;
}

}  // namespace dpt::ops
