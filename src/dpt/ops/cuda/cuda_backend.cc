// ops::Backend for Device::Kind::cuda: cuDNN and cuBLAS where they serve (cuda_kernels.h),
// our own kernels for the rest (launch.h). Everything is queued on the device's stream;
// only the results the host asks for (a count, a loss) wait for it.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "dpt/ops/cuda/cuda_kernels.h"
#include "dpt/ops/cuda/device_tensor.h"
#include "dpt/ops/cuda/launch.h"
#include "dpt/ops/ledger.h"

namespace dpt::ops {

namespace {
using cuda::f32;
using cuda::i64;

Tensor like(const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), t.device()); }
int64_t channels(const Tensor& x) { return x.dim(1); }
int64_t plane(const Tensor& x) { return x.dim(2) * x.dim(3); }
cudaStream_t stream_of(const Tensor& t) { return cuda::context_of(t).stream; }
// The partial sums of the BatchNorm kernels for x [N, C, H, W] (launch.h).
size_t batch_norm_scratch_bytes(const Tensor& x) {
  const int64_t parts = cuda::batch_norm_parts(x.dim(0), channels(x), plane(x));
  return static_cast<size_t>(2 * channels(x) * parts) * sizeof(double);
}

class CudaBackend final : public Backend {
 public:
  Tensor conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvGeometry geometry,
                        const Shape& out_shape, bool fuse_relu) const override {
    return cuda::conv2d_forward(x, weight, bias, geometry, out_shape, fuse_relu);
  }
  Tensor conv2d_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape,
                              ConvGeometry geometry) const override {
    return cuda::conv2d_backward_data(grad_out, weight, x_shape, geometry);
  }
  void conv2d_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                               const Tensor& grad_bias, ConvGeometry geometry) const override {
    cuda::conv2d_backward_weights(grad_out, x, grad_weight, grad_bias, geometry);
  }
  PoolResult pool2d_forward(const Tensor& x, PoolKind kind, int kernel, int stride,
                            const Shape& out_shape) const override {
    return cuda::pool2d_forward(x, kind, kernel, stride, out_shape);
  }
  Tensor pool2d_backward(const Tensor& grad_out, const PoolResult& forward, PoolKind kind, int kernel, int stride,
                         const Shape& x_shape) const override {
    return cuda::pool2d_backward(grad_out, forward, kind, kernel, stride, x_shape);
  }
  Tensor global_avg_pool2d_forward(const Tensor& x) const override {
    Tensor out = Tensor::empty({x.dim(0), channels(x), 1, 1}, DType::f32, x.device());
    cuda::plane_mean(f32(x), f32(out), x.dim(0) * channels(x), plane(x), stream_of(x));
    return out;
  }
  Tensor adaptive_avg_pool2d_forward(const Tensor& x, int64_t out_h, int64_t out_w) const override {
    Tensor out = Tensor::empty({x.dim(0), channels(x), out_h, out_w}, DType::f32, x.device());
    cuda::adaptive_avg_pool(f32(x), f32(out), x.dim(0) * channels(x), x.dim(2), x.dim(3), out_h, out_w, stream_of(x));
    return out;
  }
  Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& x_shape) const override {
    Tensor grad_x = Tensor::empty(x_shape, DType::f32, grad_out.device());
    cuda::adaptive_avg_pool_backward(f32(grad_out), f32(grad_x), x_shape[0] * x_shape[1], x_shape[2], x_shape[3],
                                     grad_out.dim(2), grad_out.dim(3), stream_of(grad_out));
    return grad_x;
  }
  Tensor global_avg_pool2d_backward(const Tensor& grad_out, const Shape& x_shape) const override {
    Tensor grad_x = Tensor::empty(x_shape, DType::f32, grad_out.device());
    cuda::plane_mean_backward(f32(grad_out), f32(grad_x), x_shape[0] * x_shape[1], x_shape[2] * x_shape[3],
                              stream_of(grad_out));
    return grad_x;
  }

  BatchNormResult batch_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, bool use_batch_stats,
                                     const Tensor& mean, const Tensor& variance, float eps) const override {
    const cudaStream_t s = stream_of(x);
    BatchNormResult result{like(x), mean, variance};
    if (use_batch_stats) {
      result.mean = Tensor::empty({channels(x)}, DType::f32, x.device());
      result.variance = Tensor::empty({channels(x)}, DType::f32, x.device());
      cuda::Workspace scratch(x.device().index, batch_norm_scratch_bytes(x));
      cuda::batch_norm_stats(f32(x), f32(result.mean), f32(result.variance), static_cast<double*>(scratch.data()),
                             x.dim(0), channels(x), plane(x), s);
    }
    cuda::batch_norm_apply(f32(x), f32(result.mean), f32(result.variance), f32(gamma), f32(beta), f32(result.out),
                           x.dim(0), channels(x), plane(x), eps, s);
    return result;
  }
  BatchNormGrads batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const Tensor&,
                                     bool use_batch_stats, const Tensor& mean, const Tensor& variance,
                                     float eps) const override {
    BatchNormGrads grads{like(x), like(gamma), like(gamma)};
    cuda::Workspace scratch(x.device().index, batch_norm_scratch_bytes(x));
    cuda::batch_norm_backward(f32(grad_out), f32(x), f32(mean), f32(variance), f32(gamma), f32(grads.grad_x),
                              f32(grads.grad_gamma), f32(grads.grad_beta), static_cast<double*>(scratch.data()),
                              x.dim(0), channels(x), plane(x), eps, use_batch_stats, stream_of(x));
    return grads;
  }
  void batch_norm_update_running(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                                 const Tensor& variance, float momentum, double unbiased) const override {
    cuda::batch_norm_update_running(f32(running_mean), f32(running_var), f32(mean), f32(variance), running_mean.numel(),
                                    momentum, unbiased, stream_of(mean));
  }

  Tensor activation_forward(const Tensor& x, Activation a) const override {
    Tensor y = like(x);
    cuda::activation_forward(f32(x), f32(y), x.numel(), a, stream_of(x));
    return y;
  }
  Tensor activation_backward(const Tensor& grad_out, const Tensor& x, Activation a) const override {
    Tensor grad_x = like(x);
    cuda::activation_backward(f32(grad_out), f32(x), f32(grad_x), x.numel(), a, stream_of(x));
    return grad_x;
  }

  Tensor linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias) const override {
    return cuda::linear_forward(x, weight, bias);
  }
  Tensor linear_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape) const override {
    return cuda::linear_backward_data(grad_out, weight, x_shape);
  }
  void linear_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                               const Tensor& grad_bias) const override {
    cuda::linear_backward_weights(grad_out, x, grad_weight, grad_bias);
  }
  Tensor matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b) const override {
    return cuda::matmul(a, transpose_a, b, transpose_b);
  }

  Tensor add(const Tensor& a, const Tensor& b) const override {
    Tensor out = like(a);
    cuda::add(f32(a), f32(b), f32(out), a.numel(), stream_of(a));
    return out;
  }
  Tensor multiply(const Tensor& a, const Tensor& b) const override {
    Tensor out = like(a);
    cuda::multiply(f32(a), f32(b), f32(out), a.numel(), stream_of(a));
    return out;
  }
  void accumulate(const Tensor& into, const Tensor& from) const override {
    cuda::accumulate(f32(into), f32(from), into.numel(), stream_of(into));
  }

  CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor& labels, Reduction reduction,
                                           float label_smoothing) const override {
    const int64_t n = logits.dim(0), k = logits.dim(1);
    const cudaStream_t s = stream_of(logits);
    Tensor probs = like(logits);
    Tensor losses = Tensor::empty({n}, DType::f32, logits.device());
    // Labels are checked on the host where the batch is cut (ops.h), not read back here.
    cuda::softmax_cross_entropy(f32(logits), i64(labels), f32(probs), f32(losses), n, k, label_smoothing, s);
    return {reduced(losses, reduction), probs};
  }
  Tensor cross_entropy_backward(const Tensor& probs, const Tensor& labels, const Tensor& grad_out, Reduction reduction,
                                float label_smoothing) const override {
    const int64_t n = probs.dim(0), k = probs.dim(1);
    Tensor grad = like(probs);
    const float factor = reduction == Reduction::mean ? 1.0f / static_cast<float>(n) : 1.0f;
    cuda::cross_entropy_backward(f32(probs), i64(labels), f32(grad_out), f32(grad), n, k, reduction == Reduction::none,
                                 factor, label_smoothing, stream_of(probs));
    return grad;
  }
  Tensor mse_forward(const Tensor& x, const Tensor& t, Reduction reduction) const override {
    const int64_t n = x.dim(0);
    Tensor losses = Tensor::empty({n}, DType::f32, x.device());
    cuda::squared_error_rows(f32(x), f32(t), f32(losses), n, x.numel() / n, stream_of(x));
    return reduced(losses, reduction);
  }
  Tensor mse_backward(const Tensor& x, const Tensor& t, const Tensor& grad_out, Reduction reduction) const override {
    const int64_t n = x.dim(0);
    Tensor grad = like(x);
    const float factor = reduction == Reduction::mean ? 1.0f / static_cast<float>(n) : 1.0f;
    cuda::squared_error_backward(f32(x), f32(t), f32(grad_out), f32(grad), n, x.numel() / n,
                                 reduction == Reduction::none, factor, stream_of(x));
    return grad;
  }
  // Per-example losses [N] as they are (none), or their sum or mean [1], on the device.
  static Tensor reduced(const Tensor& losses, Reduction reduction) {
    if (reduction == Reduction::none) return losses;
    const int64_t n = losses.dim(0);
    Tensor total = Tensor::empty({1}, DType::f32, losses.device());
    const float scale = reduction == Reduction::sum ? 1.0f : 1.0f / static_cast<float>(n);
    cuda::sum_scaled(f32(losses), f32(total), n, scale, stream_of(losses));
    return total;
  }
  Tensor argmax(const Tensor& x) const override {
    Tensor out = Tensor::empty({x.dim(0)}, DType::i64, x.device());
    cuda::argmax_rows(f32(x), i64(out), x.dim(0), x.dim(1), stream_of(x));
    return out;
  }
  int64_t count_correct(const Tensor& logits, const Tensor& labels) const override {
    Tensor correct = Tensor::zeros({1}, DType::i64, logits.device());
    cuda::count_correct(f32(logits), i64(labels), reinterpret_cast<unsigned long long*>(i64(correct)), logits.dim(0),
                        logits.dim(1), stream_of(logits));
    return correct.to(Device::cpu()).data<int64_t>()[0];
  }

  void add_step_figures(const Tensor& ledger, const Tensor& loss_sum, const Tensor& logits,
                        const Tensor& labels) const override {
    const cudaStream_t s = stream_of(ledger);
    cuda::count_correct(f32(logits), i64(labels), reinterpret_cast<unsigned long long*>(i64(ledger) + kCorrect),
                        logits.dim(0), logits.dim(1), s);
    cuda::add_step_loss(i64(ledger), f32(loss_sum), s);
  }
  void record_non_finite(const Tensor& ledger, int64_t tag, const std::vector<Tensor>& gradients) const override {
    const cudaStream_t s = stream_of(ledger);
    // Two zeroed counters per gradient, for this call only (the stream runs the commit
    // before any later user of the block).
    const size_t bytes = std::max<size_t>(1, gradients.size()) * 2 * sizeof(unsigned long long);
    cuda::Workspace slots(ledger.device().index, bytes);
    auto* counters = static_cast<unsigned long long*>(slots.data());
    dpt::cuda::check(cudaMemsetAsync(counters, 0, bytes, s), "cudaMemsetAsync (record_non_finite's counters)");
    for (size_t i = 0; i < gradients.size(); ++i) {
      if (gradients[i].defined() && gradients[i].numel() > 0) {
        cuda::scan_non_finite(f32(gradients[i]), gradients[i].numel(), counters + 2 * i, s);
      }
    }
    cuda::commit_non_finite(i64(ledger), counters, static_cast<int64_t>(gradients.size()), tag, s);
  }

  void pack(const std::vector<Tensor>& tensors, float* flat) const override {
    for (const Tensor& t : tensors) {
      dpt::cuda::copy_on_device(t.device().index, flat, f32(t), t.bytes());
      flat += t.numel();
    }
  }
  void unpack(const float* flat, const std::vector<Tensor>& tensors, float scale) const override {
    for (const Tensor& t : tensors) {
      cuda::scale_copy(flat, f32(t), t.numel(), scale, stream_of(t));
      flat += t.numel();
    }
  }
  void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& velocity, const SgdStep& step) const override {
    cuda::sgd_update(f32(param), f32(grad), velocity.defined() ? f32(velocity) : nullptr, param.numel(), step,
                     stream_of(param));
  }
  void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                   const AdamStep& step) const override {
    cuda::adam_update(f32(param), f32(grad), f32(exp_avg), f32(exp_avg_sq), param.numel(), step, stream_of(param));
  }
};
}  // namespace

const Backend& cuda_backend() {
  static const CudaBackend backend;
  return backend;
}

}  // namespace dpt::ops
