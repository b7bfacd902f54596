#include "dpt/train/divergence_guard.h"

#include <algorithm>
#include <cmath>

namespace dpt::train {

namespace {
// "nan", "inf" or "-inf" (std::to_string would print "-nan" for some NaNs).
std::string non_finite_str(double value) {
  if (std::isnan(value)) return "nan";
  return value > 0 ? "inf" : "-inf";
}
}  // namespace

std::optional<std::string> find_non_finite(double loss_sum,
                                           const std::vector<std::pair<std::string, Tensor>>& gradients) {
  if (!std::isfinite(loss_sum)) return "the loss is " + non_finite_str(loss_sum);
  for (const auto& [name, grad] : gradients) {
    if (!grad.defined()) continue;
    const Tensor host = grad.device().kind == Device::Kind::cuda ? grad.to(Device::cpu()) : grad;
    const float* g = host.data<float>();
    // Runs every step over every gradient: count first (a loop without branches), and
    // look for the first bad value only when there is one.
    const int64_t n = grad.numel();
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += std::isfinite(g[i]) ? 0 : 1;
    if (bad > 0) {
      const float first = *std::find_if(g, g + n, [](float v) { return !std::isfinite(v); });
      return "the gradient of " + name + " holds " + std::to_string(bad) + " non-finite value" + (bad == 1 ? "" : "s") +
             " (the first is " + non_finite_str(first) + ")";
    }
  }
  return std::nullopt;
}

std::string divergence_message(const std::string& cause, int64_t epoch, int64_t step, float lr) {
  return "training diverged in epoch " + std::to_string(epoch) + ", step " + std::to_string(step) + ": " + cause +
         ". Lower `lr` (now " + std::to_string(lr) +
         "), check the input data, or pass `on_nan` skip to drop such steps and go on";
}

}  // namespace dpt::train
