#include <cmath>
#include <memory>
#include <vector>
#include <string>

#include "dpt/autograd/node.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/check.h"
#include "dpt/ops/fused_kernels.h"
#include "dpt/ops/ops.h"

namespace dpt::ops {

namespace {
void require_per_channel(const Tensor& t, const Tensor& x, const std::string& op, const char* what) {
  require_rank(t, 1, op, what);
  require(t.dim(0) == x.dim(1), op,
          std::string(what) + " " + shape_str(t.shape()) + " does not match the " + std::to_string(x.dim(1)) +
              " channels of input " + shape_str(x.shape()));
}
}  // namespace

namespace {
void check_batch_norm(const std::string& op, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                      const Tensor& running_mean, const Tensor& running_var, bool training, float momentum,
                      float eps) {
  require_rank(x, 4, op, "input");
  require_per_channel(gamma, x, op, "gamma");
  require_per_channel(beta, x, op, "beta");
  require_per_channel(running_mean, x, op, "running_mean");
  require_per_channel(running_var, x, op, "running_var");
  require(std::isfinite(eps) && eps > 0.0f, op, "eps must be a finite number > 0, got " + std::to_string(eps));
  require(momentum >= 0.0f && momentum <= 1.0f, op, "momentum must be in [0, 1], got " + std::to_string(momentum));
  // As PyTorch: the unbiased variance for the running stats needs two values per channel.
  require(!training || x.dim(0) * x.dim(2) * x.dim(3) > 1, op,
          "training needs more than one value per channel, got input " + shape_str(x.shape()) +
              " (use a batch larger than 1 or evaluation mode)");
  require_same_device({&x, &gamma, &beta, &running_mean, &running_var}, op);
}

// batch_norm2d, or with `fused` (FusedKernels) batch_norm_relu2d in its one kernel each way.
Tensor batch_norm(const std::string& op, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                  Tensor& running_mean, Tensor& running_var, bool training, float momentum, float eps,
                  const FusedKernels* fused) {
  const Backend& kernels = backend_for(x);
  const bool record = autograd::should_record({&x, &gamma, &beta});
  // Eval mode normalizes with copies of the running stats: a later training step updates
  // them in place, and this forward's backward must still see the values it used.
  const Tensor mean = training ? Tensor() : record ? running_mean.clone() : running_mean.detach();
  const Tensor variance = training ? Tensor() : record ? running_var.clone() : running_var.detach();
  BatchNormReluResult forward =
      fused ? fused->batch_norm_relu_forward(x, gamma, beta, training, mean, variance, eps)
            : BatchNormReluResult{kernels.batch_norm_forward(x, gamma, beta, training, mean, variance, eps), nullptr};
  if (training) {
    // running = (1 - momentum) * running + momentum * batch statistic, with the unbiased
    // variance, as torch.nn.BatchNorm2d does. Buffers, not part of any graph.
    const int64_t per_channel = x.dim(0) * x.dim(2) * x.dim(3);
    const double unbiased = static_cast<double>(per_channel) / static_cast<double>(per_channel - 1);
    kernels.batch_norm_update_running(running_mean, running_var, forward.batch_norm.mean, forward.batch_norm.variance,
                                      momentum, unbiased);
  }

  Tensor out = forward.batch_norm.out;
  if (record) {
    forward.batch_norm.out = Tensor();  // backward needs the statistics (and mask), not the output
    const bool need_x = x.needs_grad(), need_gamma = gamma.needs_grad(), need_beta = beta.needs_grad();
    autograd::record(
        out, op, {&x, &gamma, &beta},
        [x = x.detach(), gamma = gamma.detach(), beta = beta.detach(), forward, fused, training, eps, need_x,
         need_gamma, need_beta](const Tensor& grad_out) -> std::vector<Tensor> {
          const BatchNormResult& stats = forward.batch_norm;
          BatchNormGrads grads =
              fused ? fused->batch_norm_relu_backward(grad_out, forward, x, gamma, beta, training, eps)
                    : backend_for(grad_out).batch_norm_backward(grad_out, x, gamma, beta, training, stats.mean,
                                                                stats.variance, eps);
          return {need_x ? grads.grad_x : Tensor(), need_gamma ? grads.grad_gamma : Tensor(),
                  need_beta ? grads.grad_beta : Tensor()};
        });
  }
  return out;
}
}  // namespace

Tensor batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean, Tensor& running_var,
                    bool training, float momentum, float eps) {
  const std::string op = "batch_norm2d";
  check_batch_norm(op, x, gamma, beta, running_mean, running_var, training, momentum, eps);
  return batch_norm(op, x, gamma, beta, running_mean, running_var, training, momentum, eps, nullptr);
}

Tensor batch_norm_relu2d(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                         Tensor& running_var, bool training, float momentum, float eps) {
  const std::string op = "batch_norm_relu2d";
  check_batch_norm(op, x, gamma, beta, running_mean, running_var, training, momentum, eps);
  if (const FusedKernels* fused = fused_kernels_for(x))
    return batch_norm(op, x, gamma, beta, running_mean, running_var, training, momentum, eps, fused);
  return relu(batch_norm(op, x, gamma, beta, running_mean, running_var, training, momentum, eps, nullptr));
}

Tensor sync_batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                         Tensor& running_var, const ReplicaSum& sum, float momentum, float eps) {
  const std::string op = "sync_batch_norm2d";
  require_rank(x, 4, op, "input");
  require_per_channel(gamma, x, op, "gamma");
  require_per_channel(beta, x, op, "beta");
  require_per_channel(running_mean, x, op, "running_mean");
  require_per_channel(running_var, x, op, "running_var");
  require(std::isfinite(eps) && eps > 0.0f, op, "eps must be a finite number > 0, got " + std::to_string(eps));
  require(momentum >= 0.0f && momentum <= 1.0f, op, "momentum must be in [0, 1], got " + std::to_string(momentum));
  require_same_device({&x, &gamma, &beta, &running_mean, &running_var}, op);
  require(x.device().kind == Device::Kind::cpu, op, "runs on CPU devices, got " + x.device().str());
  require(static_cast<bool>(sum.floats) && static_cast<bool>(sum.ints), op, "needs the replicas' sums");

  const int64_t batch = x.dim(0), channels = x.dim(1), plane = x.dim(2) * x.dim(3);
  // This shard's per-channel sums and sums of squares (in double), then the job's.
  std::vector<float> sums(2 * static_cast<size_t>(channels), 0.0f);
  {
    const float* in = x.data<float>();
    for (int64_t c = 0; c < channels; ++c) {
      double s1 = 0, s2 = 0;
      for (int64_t n = 0; n < batch; ++n) {
        const float* row = in + (n * channels + c) * plane;
        for (int64_t i = 0; i < plane; ++i) {
          s1 += row[i];
          s2 += static_cast<double>(row[i]) * row[i];
        }
      }
      sums[c] = static_cast<float>(s1);
      sums[channels + c] = static_cast<float>(s2);
    }
  }
  int64_t count = batch * plane;
  sum.floats(sums.data(), sums.size());
  sum.ints(&count, 1);
  require(count > 1, op,
          "training needs more than one value per channel over the global batch, got " + std::to_string(count));
  Tensor mean = Tensor::empty({channels}), variance = Tensor::empty({channels});
  for (int64_t c = 0; c < channels; ++c) {
    const double m = static_cast<double>(sums[c]) / static_cast<double>(count);
    const double v = static_cast<double>(sums[channels + c]) / static_cast<double>(count) - m * m;
    mean.data<float>()[c] = static_cast<float>(m);
    variance.data<float>()[c] = static_cast<float>(std::max(v, 0.0));
  }

  const Backend& kernels = backend_for(x);
  // The global statistics given, as in evaluation mode: the kernels normalize with them.
  const BatchNormResult forward = kernels.batch_norm_forward(x, gamma, beta, false, mean, variance, eps);
  const double unbiased = static_cast<double>(count) / static_cast<double>(count - 1);
  kernels.batch_norm_update_running(running_mean, running_var, mean, variance, momentum, unbiased);

  Tensor out = forward.out;
  if (autograd::should_record({&x, &gamma, &beta})) {
    const bool need_x = x.needs_grad(), need_gamma = gamma.needs_grad(), need_beta = beta.needs_grad();
    autograd::record(
        out, op, {&x, &gamma, &beta},
        [x = x.detach(), gamma = gamma.detach(), beta = beta.detach(), mean, variance, eps, count, sum, need_x,
         need_gamma, need_beta](const Tensor& grad_out) -> std::vector<Tensor> {
          // With the statistics held constant the kernels give dy * gamma * inv_std and this
          // shard's sums of dy * x_hat (gamma's gradient) and dy (beta's). The statistics'
          // own part needs those sums over the whole batch:
          //   dx = gamma * inv_std * (dy - (sum dy + x_hat * sum dy * x_hat) / count).
          BatchNormGrads grads =
              backend_for(grad_out).batch_norm_backward(grad_out, x, gamma, beta, false, mean, variance, eps);
          const int64_t batch = x.dim(0), channels = x.dim(1), plane = x.dim(2) * x.dim(3);
          std::vector<float> sums(2 * static_cast<size_t>(channels));
          for (int64_t c = 0; c < channels; ++c) {
            sums[c] = grads.grad_beta.data<float>()[c];
            sums[channels + c] = grads.grad_gamma.data<float>()[c];
          }
          sum.floats(sums.data(), sums.size());  // every replica, whatever it needs
          Tensor grad_x;
          if (need_x) {
            grad_x = Tensor::empty(x.shape());
            const float* in = x.data<float>();
            const float* scaled_dy = grads.grad_x.data<float>();  // dy * gamma * inv_std
            float* dx = grad_x.data<float>();
            for (int64_t c = 0; c < channels; ++c) {
              const double inv_std = 1.0 / std::sqrt(static_cast<double>(variance.data<float>()[c]) + eps);
              const double g = gamma.data<float>()[c] * inv_std / static_cast<double>(count);
              const double m = mean.data<float>()[c], sum_dy = sums[c], sum_dy_xhat = sums[channels + c];
              for (int64_t n = 0; n < batch; ++n) {
                const int64_t at = (n * channels + c) * plane;
                for (int64_t i = 0; i < plane; ++i) {
                  const double x_hat = (in[at + i] - m) * inv_std;
                  dx[at + i] = static_cast<float>(scaled_dy[at + i] - g * (sum_dy + x_hat * sum_dy_xhat));
                }
              }
            }
          }
          return {grad_x, need_gamma ? grads.grad_gamma : Tensor(), need_beta ? grads.grad_beta : Tensor()};
        });
  }
  return out;
}

}  // namespace dpt::ops
