#include "dpt/optim/sgd.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace dpt::optim {

void check_learning_rate(double lr) {
  if (!(lr >= 0.0) || !std::isfinite(lr)) {
    throw std::invalid_argument("learning rate must be a finite number >= 0, got " + std::to_string(lr));
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
    float* p = param.data<float>();
    const float* g = grad.data<float>();
    for (int64_t i = 0; i < param.numel(); ++i) p[i] -= scale * g[i];
    param.zero_grad();
  }
}

}  // namespace dpt::optim
