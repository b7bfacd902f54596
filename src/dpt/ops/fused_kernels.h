// The optional fused-kernel layer: kernels that do the work of two or three of Backend's
// ops in one pass over memory. Backend (backend.h) is the reference set of ops; a backend
// may add a FusedKernels beside it (Backend::fused()). The ops that use these kernels
// (conv2d_relu_avg_pool2d, batch_norm_relu2d, add_relu in ops.h) compose Backend's ops
// wherever fused() is null or a kernel declines its shapes, with the same values: the
// composition is the reference the fused kernels are tested against
// (tests/fusion_test.cc). Shapes are checked by the ops, as for Backend.
#pragma once

#include <cstdint>
#include <memory>

#include "dpt/core/tensor.h"
#include "dpt/ops/backend.h"

namespace dpt::ops {

// batch_norm_relu_forward's result: the BatchNorm's (with `out` = relu(bn(x))) and what
// its backward needs of the ReLU (the backend's mask of where bn(x) > 0).
struct BatchNormReluResult {
  BatchNormResult batch_norm;
  std::shared_ptr<void> relu_mask;
};

class FusedKernels {
 public:
  virtual ~FusedKernels() = default;

  // --- Convolution, ReLU and average pooling (window == step): LeNet's block, or any such.

  // relu_backward(pool2d_backward(grad_pooled)) in one pass: grad_pooled / pool^2 spread
  // over each window where relu_out > 0, else 0; 0 in rows and columns the pooling dropped.
  virtual Tensor relu_avg_pool_backward(const Tensor& grad_pooled, const Tensor& relu_out, int pool) const = 0;

  // The whole block in one kernel when its input needs no gradient (a first layer), without
  // the convolution's output in memory: `out` is the pooled output [N, O, H / pool, W / pool];
  // with `for_backward`, `workspace` holds what conv2d_relu_avg_pool_weight_grads needs of
  // the ReLU. An undefined `out` where there is no kernel for these shapes.
  virtual PoolResult conv2d_relu_avg_pool_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                                  ConvGeometry geometry, int pool, const Shape& out_shape,
                                                  bool for_backward) const = 0;
  // Its backward: fills grad_weight and (when defined) grad_bias as conv2d_backward_weights
  // would from relu_avg_pool_backward's result. Called only where the forward gave an output.
  virtual void conv2d_relu_avg_pool_weight_grads(const Tensor& grad_pooled, const PoolResult& forward, int pool,
                                                 const Tensor& x, ConvGeometry geometry, const Tensor& grad_weight,
                                                 const Tensor& grad_bias) const = 0;

  // The top-left h x w corner of every plane of x [N, C, H, W], for a convolution whose last
  // rows or columns of output a pooling drops; undefined where there is no such copy (the
  // caller then convolves all of x). pad_corner is its backward: grad [N, C, h, w] in the
  // top-left corner of zeros of x_shape.
  virtual Tensor crop_corner(const Tensor& x, int64_t h, int64_t w) const = 0;
  virtual Tensor pad_corner(const Tensor& grad, const Shape& x_shape) const = 0;

  // --- BatchNorm then ReLU (conv, BatchNorm, ReLU: ResNet's stem and every block's first half).

  // relu(batch_norm_forward(...).out) in one pass, the statistics as batch_norm_forward's.
  virtual BatchNormReluResult batch_norm_relu_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                      bool use_batch_stats, const Tensor& mean,
                                                      const Tensor& variance, float eps) const = 0;
  // batch_norm_backward(relu_backward(grad_out, relu(bn(x))), ...) in one pass.
  virtual BatchNormGrads batch_norm_relu_backward(const Tensor& grad_out, const BatchNormReluResult& forward,
                                                  const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                                  bool use_batch_stats, float eps) const = 0;

  // --- The residual tail's add and ReLU: relu(a + b) in one pass (its backward is
  // relu_backward on the output, whose gradient both operands share).
  virtual Tensor add_relu(const Tensor& a, const Tensor& b) const = 0;
};

// Whether backends offer their fused kernels (true, the default; ops/testing.h turns them
// off for tests and benchmarks that compare the two).
bool fused_kernels_enabled();

// The fused kernels of the device `t` lives on, or null where its backend has none.
inline const FusedKernels* fused_kernels_for(const Tensor& t) { return backend_for(t).fused(); }

}  // namespace dpt::ops
