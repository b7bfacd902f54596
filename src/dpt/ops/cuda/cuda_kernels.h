// The CUDA backend's library-backed kernels: cuDNN convolutions and pooling (conv2d.cc,
// pool2d.cc) and cuBLAS matrix products (linear.cc). Same contracts as ops::Backend;
// cuda_backend.cc adds the kernels of launch.h for the rest.
#pragma once

#include "dpt/core/tensor.h"
#include "dpt/ops/backend.h"

namespace dpt::ops::cuda {

Tensor conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvGeometry geometry,
                      const Shape& out_shape, bool fuse_relu);
Tensor conv2d_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape, ConvGeometry geometry);
void conv2d_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                             const Tensor& grad_bias, ConvGeometry geometry);

PoolResult pool2d_forward(const Tensor& x, PoolKind kind, int kernel, int stride, const Shape& out_shape);
Tensor pool2d_backward(const Tensor& grad_out, const PoolResult& forward, PoolKind kind, int kernel, int stride,
                       const Shape& x_shape);

Tensor linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias);
Tensor linear_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape);
void linear_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                             const Tensor& grad_bias);
Tensor matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b);

}  // namespace dpt::ops::cuda
