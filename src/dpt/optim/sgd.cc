#include "dpt/optim/sgd.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "dpt/core/config_error.h"
#include "dpt/ops/backend.h"

namespace dpt::optim {

void check_learning_rate(double lr) {
  if (!(lr >= 0.0) || !std::isfinite(lr)) {
    throw ConfigError("lr", "learning rate must be a finite number >= 0, got " + std::to_string(lr));
  }
}

void sgd(const std::vector<Tensor>& params, float lr, int64_t batch_size) {
  check_learning_rate(lr);
  if (batch_size < 1)
    throw std::invalid_argument("sgd: batch size must be positive, got " + std::to_string(batch_size));
  const float scale = lr / static_cast<float>(batch_size);
  for (const Tensor& param : params) {
    const Tensor grad = param.grad();
    if (!grad.defined()) continue;  // a parameter the loss did not reach
    ops::backend_for(param).sgd_update(param, grad, Tensor(), ops::SgdStep{.lr = scale});
    param.zero_grad();
  }
}

}  // namespace dpt::optim
