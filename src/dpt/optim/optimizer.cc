#include "dpt/optim/optimizer.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "dpt/core/config_error.h"
#include "dpt/ops/backend.h"
#include "dpt/optim/sgd.h"

namespace dpt::optim {

SGD::SGD(std::vector<std::vector<Tensor>> replica_params, SgdOptions options)
    : params_(std::move(replica_params)), options_(options) {
  check_learning_rate(options.lr);
  if (!(options.momentum >= 0.0f && options.momentum < 1.0f)) {
    throw ConfigError("momentum", "momentum must be in [0, 1), got " + std::to_string(options.momentum));
  }
  if (!(options.weight_decay >= 0.0f) || !std::isfinite(options.weight_decay)) {
    throw ConfigError("weight_decay",
                      "weight decay must be a finite number >= 0, got " + std::to_string(options.weight_decay));
  }
  for (const auto& replica : params_) {
    if (replica.size() != params_[0].size()) throw std::invalid_argument("SGD: replicas with different parameters");
  }
  velocity_.assign(params_.size(), std::vector<Tensor>(params_.empty() ? 0 : params_[0].size()));
}

void SGD::step() {
  const float lr = options_.lr, momentum = options_.momentum, decay = options_.weight_decay;
  for (size_t r = 0; r < params_.size(); ++r) {
    for (size_t i = 0; i < params_[r].size(); ++i) {
      const Tensor& param = params_[r][i];
      const Tensor grad = param.grad();
      if (!grad.defined()) continue;
      if (momentum == 0.0f) {
        ops::backend_for(param).sgd_update(param, grad, Tensor(), lr, 0.0f, decay, false);
        continue;
      }
      Tensor& velocity = velocity_[r][i];
      const bool first = !velocity.defined();
      if (first) velocity = Tensor::empty(param.shape(), DType::f32, param.device());
      ops::backend_for(param).sgd_update(param, grad, velocity, lr, momentum, decay, first);
    }
  }
}

void SGD::set_lr(float lr) {
  check_learning_rate(lr);
  options_.lr = lr;
}

void SGD::load_momentum_buffers(const std::vector<Tensor>& buffers) {
  for (size_t r = 0; r < params_.size(); ++r) {
    if (buffers.size() != params_[r].size()) {
      throw std::invalid_argument("SGD: " + std::to_string(buffers.size()) + " momentum buffers for " +
                                  std::to_string(params_[r].size()) + " parameters");
    }
    for (size_t i = 0; i < buffers.size(); ++i) {
      velocity_[r][i] = Tensor();
      if (!buffers[i].defined()) continue;
      velocity_[r][i] = Tensor::empty(params_[r][i].shape(), DType::f32, params_[r][i].device());
      velocity_[r][i].copy_from(buffers[i]);
    }
  }
}

void SGD::zero_grad() {
  for (const auto& replica : params_) {
    for (const Tensor& p : replica) p.zero_grad();
  }
}

}  // namespace dpt::optim
