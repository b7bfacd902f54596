// ops::FusedKernels for Device::Kind::cpu: the fused kernels of dpt/ops/cpu/kernels.h.
#include "dpt/ops/cpu/cpu_fused_kernels.h"

#include "dpt/ops/cpu/kernels.h"

namespace dpt::ops::cpu {

namespace {
class CpuFusedKernels final : public FusedKernels {
 public:
  Tensor relu_avg_pool_backward(const Tensor& grad_pooled, const Tensor& relu_out, int pool) const override {
    return cpu::relu_avg_pool_backward(grad_pooled, relu_out, pool);
  }
  PoolResult conv2d_relu_avg_pool_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                          ConvGeometry geometry, int pool, const Shape& out_shape,
                                          bool for_backward) const override {
    return cpu::conv2d_relu_avg_pool_forward(x, weight, bias, geometry, pool, out_shape, for_backward);
  }
  void conv2d_relu_avg_pool_weight_grads(const Tensor& grad_pooled, const PoolResult& forward, int pool,
                                         const Tensor& x, ConvGeometry geometry, const Tensor& grad_weight,
                                         const Tensor& grad_bias) const override {
    cpu::conv2d_relu_avg_pool_weight_grads(grad_pooled, forward, pool, x, geometry, grad_weight, grad_bias);
  }
  Tensor crop_corner(const Tensor& x, int64_t h, int64_t w) const override { return cpu::crop_corner(x, h, w); }
  Tensor pad_corner(const Tensor& grad, const Shape& x_shape) const override { return cpu::pad_corner(grad, x_shape); }
  BatchNormReluResult batch_norm_relu_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                              bool use_batch_stats, const Tensor& mean, const Tensor& variance,
                                              float eps) const override {
    return cpu::batch_norm_relu_forward(x, gamma, beta, use_batch_stats, mean, variance, eps);
  }
  BatchNormGrads batch_norm_relu_backward(const Tensor& grad_out, const BatchNormReluResult& forward, const Tensor& x,
                                          const Tensor& gamma, const Tensor& beta, bool use_batch_stats,
                                          float eps) const override {
    return cpu::batch_norm_relu_backward(grad_out, forward, x, gamma, beta, use_batch_stats, eps);
  }
  Tensor add_relu(const Tensor& a, const Tensor& b) const override { return cpu::add_relu(a, b); }
};
}  // namespace

const FusedKernels& fused_kernels() {
  static const CpuFusedKernels kernels;
  return kernels;
}

}  // namespace dpt::ops::cpu
