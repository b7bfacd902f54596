// The CPU backend: oneDNN kernels for the ops in dpt/ops/ops.h. They take checked shapes
// (ops/*.cc validate and record autograd) and write freshly allocated outputs.
#pragma once

#include "dpt/core/tensor.h"

namespace dpt::ops::cpu {

struct ConvGeometry {
  int stride = 1;
  int padding = 0;
};
Tensor conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvGeometry geometry,
                      const Shape& out_shape);
Tensor conv2d_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape,
                            ConvGeometry geometry);
// Fills grad_weight and (when defined) grad_bias.
void conv2d_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                             const Tensor& grad_bias, ConvGeometry geometry);

enum class PoolKind { max, avg };
struct PoolResult {
  Tensor out;
  std::shared_ptr<void> workspace;  // max pooling remembers where each maximum was
};
PoolResult pool2d_forward(const Tensor& x, PoolKind kind, int kernel, int stride, const Shape& out_shape);
Tensor pool2d_backward(const Tensor& grad_out, const PoolResult& forward, PoolKind kind, int kernel, int stride,
                       const Shape& x_shape);

Tensor relu_forward(const Tensor& x);
Tensor relu_backward(const Tensor& grad_out, const Tensor& x);

Tensor linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias);
Tensor linear_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape);
void linear_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                             const Tensor& grad_bias);

// c = op(a) @ op(b), op transposing when asked; a, b, c row-major 2-D.
Tensor matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b);

}  // namespace dpt::ops::cpu
