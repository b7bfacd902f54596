#include <cmath>
#include <string>

#include "dpt/autograd/node.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/check.h"
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

Tensor batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean, Tensor& running_var,
                    bool training, float momentum, float eps) {
  const std::string op = "batch_norm2d";
  require_rank(x, 4, op, "input");
  require_per_channel(gamma, x, op, "gamma");
  require_per_channel(beta, x, op, "beta");
  require_per_channel(running_mean, x, op, "running_mean");
  require_per_channel(running_var, x, op, "running_var");
  require(std::isfinite(eps) && eps > 0.0f, op, "eps must be a finite number > 0, got " + std::to_string(eps));
  require(momentum >= 0.0f && momentum <= 1.0f, op, "momentum must be in [0, 1], got " + std::to_string(momentum));
  const int64_t per_channel = x.dim(0) * x.dim(2) * x.dim(3);
  // As PyTorch: the unbiased variance for the running stats needs two values per channel.
  require(!training || per_channel > 1, op,
          "training needs more than one value per channel, got input " + shape_str(x.shape()) +
              " (use a batch larger than 1 or evaluation mode)");

  require_same_device({&x, &gamma, &beta, &running_mean, &running_var}, op);
  const Backend& kernels = backend_for(x);
  BatchNormResult forward;
  if (training) {
    forward = kernels.batch_norm_forward(x, gamma, beta, true, Tensor(), Tensor(), eps);
    // running = (1 - momentum) * running + momentum * batch statistic, with the unbiased
    // variance, as torch.nn.BatchNorm2d does. Buffers, not part of any graph.
    const double unbiased = static_cast<double>(per_channel) / static_cast<double>(per_channel - 1);
    kernels.batch_norm_update_running(running_mean, running_var, forward.mean, forward.variance, momentum, unbiased);
  } else {
    // Copies: a later training step updates the running stats in place, and this
    // forward's backward must still see the values it normalized with.
    const bool record = autograd::should_record({&x, &gamma, &beta});
    forward = kernels.batch_norm_forward(x, gamma, beta, false, record ? running_mean.clone() : running_mean.detach(),
                                         record ? running_var.clone() : running_var.detach(), eps);
  }

  Tensor out = forward.out;
  if (autograd::should_record({&x, &gamma, &beta})) {
    const bool need_x = x.needs_grad(), need_gamma = gamma.needs_grad(), need_beta = beta.needs_grad();
    autograd::record(
        out, op, {&x, &gamma, &beta},
        [x = x.detach(), gamma = gamma.detach(), beta = beta.detach(), mean = forward.mean, variance = forward.variance,
         training, eps, need_x, need_gamma, need_beta](const Tensor& grad_out) -> std::vector<Tensor> {
          BatchNormGrads grads =
              backend_for(grad_out).batch_norm_backward(grad_out, x, gamma, beta, training, mean, variance, eps);
          return {need_x ? grads.grad_x : Tensor(), need_gamma ? grads.grad_gamma : Tensor(),
                  need_beta ? grads.grad_beta : Tensor()};
        });
  }
  return out;
}

}  // namespace dpt::ops
