#include "dpt/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "dpt/core/config_error.h"
#include "dpt/ops/backend.h"
#include "dpt/optim/sgd.h"

namespace dpt::optim {
namespace {

void check_fraction(const char* field, float value) {
  if (!(value >= 0.0f && value < 1.0f)) {
    throw ConfigError(field, std::string(field) + " must be in [0, 1), got " + std::to_string(value));
  }
}

void check_weight_decay(float decay) {
  if (!(decay >= 0.0f) || !std::isfinite(decay)) {
    throw ConfigError("weight_decay", "weight decay must be a finite number >= 0, got " + std::to_string(decay));
  }
}

Tensor zeros_like(const Tensor& param) { return Tensor::zeros(param.shape(), DType::f32, param.device()); }

}  // namespace

Optimizer::Optimizer(std::vector<std::vector<Tensor>> replica_params, float lr, std::vector<std::string> slots)
    : params_(std::move(replica_params)), slots_(std::move(slots)), lr_(lr) {
  check_learning_rate(lr);
  for (const auto& replica : params_) {
    if (replica.size() != params_[0].size()) {
      throw std::invalid_argument("optimizer: the replicas hold different numbers of parameters (" +
                                  std::to_string(params_[0].size()) + " and " + std::to_string(replica.size()) +
                                  "); pass DataParallel::replica_parameters()");
    }
  }
  state_.resize(params_.size());
  for (size_t r = 0; r < params_.size(); ++r) {
    state_[r].assign(params_[r].size(), std::vector<Tensor>(slots_.size()));
  }
}

void Optimizer::step() {
  count_step();
  for (size_t r = 0; r < params_.size(); ++r) {
    for (size_t i = 0; i < params_[r].size(); ++i) {
      const Tensor& param = params_[r][i];
      const Tensor grad = param.grad();
      if (grad.defined()) update(param, grad, state_[r][i]);
    }
  }
}

void Optimizer::zero_grad() {
  for (const auto& replica : params_) {
    for (const Tensor& p : replica) p.zero_grad();
  }
}

void Optimizer::set_lr(float lr) {
  check_learning_rate(lr);
  lr_ = lr;
}

const Tensor& Optimizer::state(size_t slot, size_t replica, size_t param) const {
  return state_.at(replica).at(param).at(slot);
}

size_t Optimizer::state_bytes() const {
  size_t bytes = 0;
  for (const auto& replica : state_) {
    for (const auto& param : replica) {
      for (const Tensor& slot : param) bytes += slot.defined() ? static_cast<size_t>(slot.numel()) * sizeof(float) : 0;
    }
  }
  return bytes;
}

std::vector<std::string> optimizer_slots(std::string_view name) {
  if (name == "sgd") return {"momentum"};
  return {"exp_avg", "exp_avg_sq"};
}

void Optimizer::load_state(const std::vector<std::vector<Tensor>>& values, int64_t steps) {
  if (values.size() != slots_.size()) {
    throw std::invalid_argument(name() + ": " + std::to_string(values.size()) + " state slots given, it keeps " +
                                std::to_string(slots_.size()));
  }
  for (size_t s = 0; s < slots_.size(); ++s) {
    for (size_t r = 0; r < params_.size(); ++r) {
      if (values[s].size() != params_[r].size()) {
        throw std::invalid_argument(name() + ": " + std::to_string(values[s].size()) + " " + slots_[s] + " tensors for " +
                                    std::to_string(params_[r].size()) + " parameters");
      }
      for (size_t i = 0; i < values[s].size(); ++i) {
        Tensor& into = state_[r][i][s];
        into = Tensor();
        if (!values[s][i].defined()) continue;
        if (values[s][i].shape() != params_[r][i].shape()) {
          throw std::invalid_argument(name() + ": " + slots_[s] + " of parameter " + std::to_string(i) + " is " +
                                      shape_str(values[s][i].shape()) + ", the parameter " +
                                      shape_str(params_[r][i].shape()));
        }
        into = Tensor::empty(params_[r][i].shape(), DType::f32, params_[r][i].device());
        into.copy_from(values[s][i]);
      }
    }
  }
  steps_ = steps;
}

SGD::SGD(std::vector<std::vector<Tensor>> replica_params, SgdOptions options)
    : Optimizer(std::move(replica_params), options.lr, optimizer_slots("sgd")), options_(options) {
  check_fraction("momentum", options.momentum);
  check_weight_decay(options.weight_decay);
  if (options.nesterov && options.momentum == 0.0f) {
    throw ConfigError("nesterov", "Nesterov momentum needs `momentum` > 0");
  }
}

void SGD::update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& state) {
  ops::SgdStep step{lr(), options_.momentum, options_.weight_decay, false, options_.nesterov};
  Tensor& velocity = state[0];
  if (options_.momentum != 0.0f) {
    step.first = !velocity.defined();
    if (step.first) velocity = Tensor::empty(param.shape(), DType::f32, param.device());
  }
  ops::backend_for(param).sgd_update(param, grad, velocity, step);
}

Adam::Adam(std::vector<std::vector<Tensor>> replica_params, AdamOptions options)
    : Adam(std::move(replica_params), options, /*decoupled=*/false) {}

Adam::Adam(std::vector<std::vector<Tensor>> replica_params, AdamOptions options, bool decoupled)
    : Optimizer(std::move(replica_params), options.lr, optimizer_slots("adam")),
      options_(options),
      decoupled_(decoupled) {
  check_fraction("beta1", options.beta1);
  check_fraction("beta2", options.beta2);
  if (!(options.eps > 0.0f) || !std::isfinite(options.eps)) {
    throw ConfigError("eps", "`eps` must be a finite number > 0, got " + std::to_string(options.eps));
  }
  check_weight_decay(options.weight_decay);
}

void Adam::update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& state) {
  if (!state[0].defined()) state[0] = zeros_like(param);
  if (!state[1].defined()) state[1] = zeros_like(param);
  const double t = static_cast<double>(steps());
  const ops::AdamStep step{lr(),
                           options_.beta1,
                           options_.beta2,
                           options_.eps,
                           options_.weight_decay,
                           decoupled_,
                           static_cast<float>(1.0 - std::pow(static_cast<double>(options_.beta1), t)),
                           static_cast<float>(1.0 - std::pow(static_cast<double>(options_.beta2), t))};
  ops::backend_for(param).adam_update(param, grad, state[0], state[1], step);
}

void check_optimizer(std::string_view name, const OptimizerSettings& s) {
  if (std::find(kOptimizers.begin(), kOptimizers.end(), name) == kOptimizers.end()) {
    throw ConfigError("optimizer", "unknown `optimizer` '" + std::string(name) + "'; choose sgd, adam or adamw");
  }
  if (name != "sgd" && (s.momentum != 0.0f || s.nesterov)) {
    const char* field = s.momentum != 0.0f ? "momentum" : "nesterov";
    throw ConfigError(field, std::string("`") + field + "` is SGD's; " + std::string(name) +
                                 " keeps its own moments (`beta1`, `beta2`)");
  }
}

std::unique_ptr<Optimizer> make_optimizer(std::string_view name, std::vector<std::vector<Tensor>> replica_params,
                                          const OptimizerSettings& s) {
  check_optimizer(name, s);
  if (name == "sgd") return std::make_unique<SGD>(std::move(replica_params), SgdOptions{s.lr, s.momentum, s.weight_decay, s.nesterov});
  const AdamOptions adam{s.lr, s.beta1, s.beta2, s.eps, s.weight_decay};
  if (name == "adam") return std::make_unique<Adam>(std::move(replica_params), adam);
  return std::make_unique<AdamW>(std::move(replica_params), adam);
}

}  // namespace dpt::optim
