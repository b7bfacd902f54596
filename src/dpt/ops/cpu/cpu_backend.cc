// ops::Backend for Device::Kind::cpu: the kernels of dpt/ops/cpu/kernels.h.
#include "dpt/ops/cpu/cpu_fused_kernels.h"
#include "dpt/ops/cpu/kernels.h"

namespace dpt::ops {

namespace {
class CpuBackend final : public Backend {
 public:
  const FusedKernels* fused() const override { return fused_kernels_enabled() ? &cpu::fused_kernels() : nullptr; }
  Tensor conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvGeometry geometry,
                        const Shape& out_shape, bool fuse_relu) const override {
    return cpu::conv2d_forward(x, weight, bias, geometry, out_shape, fuse_relu);
  }
  Tensor conv2d_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape,
                              ConvGeometry geometry) const override {
    return cpu::conv2d_backward_data(grad_out, weight, x_shape, geometry);
  }
  void conv2d_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                               const Tensor& grad_bias, ConvGeometry geometry) const override {
    cpu::conv2d_backward_weights(grad_out, x, grad_weight, grad_bias, geometry);
  }
  PoolResult pool2d_forward(const Tensor& x, PoolKind kind, int kernel, int stride,
                            const Shape& out_shape) const override {
    return cpu::pool2d_forward(x, kind, kernel, stride, out_shape);
  }
  Tensor pool2d_backward(const Tensor& grad_out, const PoolResult& forward, PoolKind kind, int kernel, int stride,
                         const Shape& x_shape) const override {
    return cpu::pool2d_backward(grad_out, forward, kind, kernel, stride, x_shape);
  }
  Tensor global_avg_pool2d_forward(const Tensor& x) const override { return cpu::global_avg_pool2d_forward(x); }
  Tensor global_avg_pool2d_backward(const Tensor& grad_out, const Shape& x_shape) const override {
    return cpu::global_avg_pool2d_backward(grad_out, x_shape);
  }
  Tensor adaptive_avg_pool2d_forward(const Tensor& x, int64_t out_h, int64_t out_w) const override {
    return cpu::adaptive_avg_pool2d_forward(x, out_h, out_w);
  }
  Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& x_shape) const override {
    return cpu::adaptive_avg_pool2d_backward(grad_out, x_shape);
  }
  BatchNormResult batch_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, bool use_batch_stats,
                                     const Tensor& mean, const Tensor& variance, float eps) const override {
    return cpu::batch_norm_forward(x, gamma, beta, use_batch_stats, mean, variance, eps);
  }
  BatchNormGrads batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                     bool use_batch_stats, const Tensor& mean, const Tensor& variance,
                                     float eps) const override {
    return cpu::batch_norm_backward(grad_out, x, gamma, beta, use_batch_stats, mean, variance, eps);
  }
  void batch_norm_update_running(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                                 const Tensor& variance, float momentum, double unbiased) const override {
    cpu::batch_norm_update_running(running_mean, running_var, mean, variance, momentum, unbiased);
  }
  Tensor activation_forward(const Tensor& x, Activation a) const override { return cpu::activation_forward(x, a); }
  Tensor activation_backward(const Tensor& grad_out, const Tensor& x, Activation a) const override {
    return cpu::activation_backward(grad_out, x, a);
  }
  Tensor linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias) const override {
    return cpu::linear_forward(x, weight, bias);
  }
  Tensor linear_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape) const override {
    return cpu::linear_backward_data(grad_out, weight, x_shape);
  }
  void linear_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                               const Tensor& grad_bias) const override {
    cpu::linear_backward_weights(grad_out, x, grad_weight, grad_bias);
  }
  Tensor matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b) const override {
    return cpu::matmul(a, transpose_a, b, transpose_b);
  }
  Tensor add(const Tensor& a, const Tensor& b) const override { return cpu::add(a, b); }
  Tensor multiply(const Tensor& a, const Tensor& b) const override { return cpu::multiply(a, b); }
  void accumulate(const Tensor& into, const Tensor& from) const override { cpu::accumulate(into, from); }
  CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor& labels, Reduction reduction,
                                           float label_smoothing) const override {
    return cpu::cross_entropy_forward(logits, labels, reduction, label_smoothing);
  }
  Tensor cross_entropy_backward(const Tensor& probs, const Tensor& labels, const Tensor& grad_out, Reduction reduction,
                                float label_smoothing) const override {
    return cpu::cross_entropy_backward(probs, labels, grad_out, reduction, label_smoothing);
  }
  Tensor mse_forward(const Tensor& x, const Tensor& t, Reduction reduction) const override {
    return cpu::mse_forward(x, t, reduction);
  }
  Tensor mse_backward(const Tensor& x, const Tensor& t, const Tensor& grad_out, Reduction reduction) const override {
    return cpu::mse_backward(x, t, grad_out, reduction);
  }
  Tensor argmax(const Tensor& x) const override { return cpu::argmax(x); }
  int64_t count_correct(const Tensor& logits, const Tensor& labels) const override {
    return cpu::count_correct(logits, labels);
  }
  void add_step_figures(const Tensor& ledger, const Tensor& loss_sum, const Tensor& logits,
                        const Tensor& labels) const override {
    cpu::add_step_figures(ledger, loss_sum, logits, labels);
  }
  void record_non_finite(const Tensor& ledger, int64_t tag, const std::vector<Tensor>& gradients) const override {
    cpu::record_non_finite(ledger, tag, gradients);
  }
  void pack(const std::vector<Tensor>& tensors, float* flat) const override { cpu::pack(tensors, flat); }
  void unpack(const float* flat, const std::vector<Tensor>& tensors, float scale) const override {
    cpu::unpack(flat, tensors, scale);
  }
  void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& velocity, const SgdStep& step) const override {
    cpu::sgd_update(param, grad, velocity, step);
  }
  void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                   const AdamStep& step) const override {
    cpu::adam_update(param, grad, exp_avg, exp_avg_sq, step);
  }
};
}  // namespace

const Backend& cpu_backend() {
  static const CpuBackend backend;
  return backend;
}

}  // namespace dpt::ops
