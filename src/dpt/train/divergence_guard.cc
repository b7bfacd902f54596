#include "dpt/train/divergence_guard.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "dpt/ops/ledger.h"

namespace dpt::train {

namespace {
// "nan", "inf" or "-inf" from ops::non_finite_bit's bits; several, as a sum of them would
// be: NaN with any other, or +inf with -inf, is nan.
std::string non_finite_str(int64_t bits) {
  if ((bits & ops::kNanBit) != 0 || (bits & (ops::kPosInfBit | ops::kNegInfBit)) == (ops::kPosInfBit | ops::kNegInfBit))
    return "nan";
  return (bits & ops::kPosInfBit) != 0 ? "inf" : "-inf";
}
}  // namespace

std::string describe_non_finite(const parallel::NonFiniteUpdate& update, const std::vector<std::string>& names) {
  if (update.cause < 0) return "the loss is " + non_finite_str(update.first);
  const std::string name = update.cause < static_cast<int64_t>(names.size()) ? names[update.cause]
                                                                             : "parameter " + std::to_string(update.cause);
  return "the gradient of " + name + " holds " + std::to_string(update.count) + " non-finite value" +
         (update.count == 1 ? "" : "s") + " (the first is " + non_finite_str(update.first) + ")";
}

std::optional<std::string> find_non_finite(double loss_sum,
                                           const std::vector<std::pair<std::string, Tensor>>& gradients) {
  if (!std::isfinite(loss_sum)) return describe_non_finite({1, -1, 0, ops::non_finite_bit(loss_sum)}, {});
  for (size_t i = 0; i < gradients.size(); ++i) {
    const Tensor& grad = gradients[i].second;
    if (!grad.defined()) continue;
    const Tensor host = grad.device().kind == Device::Kind::cuda ? grad.to(Device::cpu()) : grad;
    const float* g = host.data<float>();
    const int64_t n = grad.numel();
    int64_t bad = 0;  // count first (a loop without branches), find the first only when there is one
    for (int64_t k = 0; k < n; ++k) bad += std::isfinite(g[k]) ? 0 : 1;
    if (bad > 0) {
      const float first = *std::find_if(g, g + n, [](float v) { return !std::isfinite(v); });
      return describe_non_finite({1, 0, bad, ops::non_finite_bit(first)}, {gradients[i].first});
    }
  }
  return std::nullopt;
}

std::string divergence_message(const std::string& cause, int64_t epoch, int64_t step, float update_lr, float lr) {
  const auto text = [](float v) {
    char s[32];
    std::snprintf(s, sizeof s, "%g", static_cast<double>(v));
    return std::string(s);
  };
  const std::string now = update_lr == lr ? "now " + text(lr)
                                          : text(lr) + "; this update's learning rate was " + text(update_lr) +
                                                " after `lr_schedule` and `lr_scaling`";
  return "training diverged in epoch " + std::to_string(epoch) + ", step " + std::to_string(step) + ": " + cause +
         ". Lower `lr` (" + now + "), check the input data, or pass `on_nan` skip to drop such steps and go on";
}

}  // namespace dpt::train
