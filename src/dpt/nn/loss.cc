#include "dpt/nn/loss.h"

#include <stdexcept>

#include "dpt/core/config_error.h"
#include "dpt/ops/ops.h"

namespace dpt::nn {

namespace {
// The class-output contract both losses share: outputs [n, K], labels int64 [n].
void check_outputs_and_labels(const std::string& loss, const Tensor& outputs, const Tensor& labels) {
  if (outputs.ndim() != 2 || labels.ndim() != 1 || labels.dim(0) != outputs.dim(0)) {
    throw std::invalid_argument(loss + " loss: outputs " + shape_str(outputs.shape()) + " and labels " +
                                shape_str(labels.shape()) +
                                " do not match: it needs outputs [n, classes] and one label per row [n]; flatten the "
                                "network's output or give it one label per example");
  }
}
}  // namespace

CrossEntropyLoss::CrossEntropyLoss(float label_smoothing) : label_smoothing_(label_smoothing) {
  if (!(label_smoothing >= 0.0f && label_smoothing < 1.0f)) {
    throw std::invalid_argument("cross-entropy loss: label smoothing " + std::to_string(label_smoothing) +
                                " is outside [0, 1); 0 turns it off, 0.1 is usual");
  }
}

std::string CrossEntropyLoss::name() const {
  return label_smoothing_ > 0.0f ? "cross-entropy (label smoothing " + std::to_string(label_smoothing_).substr(0, 4) + ")"
                                 : "cross-entropy";
}

Tensor CrossEntropyLoss::sum(const Tensor& outputs, const Tensor& labels) const {
  check_outputs_and_labels("cross-entropy", outputs, labels);
  return ops::cross_entropy(outputs, labels, ops::Reduction::sum, label_smoothing_);
}

Tensor MSELoss::sum(const Tensor& outputs, const Tensor& labels) const {
  check_outputs_and_labels("mse", outputs, labels);
  const Tensor host_labels = labels.device().kind == Device::Kind::cpu ? labels : labels.to(Device::cpu());
  const int64_t n = outputs.dim(0), k = outputs.dim(1);
  ops::check_labels(host_labels, k);
  Tensor targets = Tensor::zeros({n, k}, DType::f32, Device::cpu());
  float* t = targets.data<float>();
  const int64_t* y = host_labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) t[i * k + y[i]] = 1.0f;
  return ops::mse_loss(outputs, targets.to(outputs.device()), ops::Reduction::sum);
}

std::unique_ptr<Loss> make_loss(const LossSettings& settings) {
  if (settings.name == "cross-entropy") return std::make_unique<CrossEntropyLoss>(settings.label_smoothing);
  if (settings.name == "mse") {
    if (settings.label_smoothing != 0.0f) {
      throw std::invalid_argument("label smoothing is for the cross-entropy loss, not mse; drop it or use cross-entropy");
    }
    return std::make_unique<MSELoss>();
  }
  throw bad_choice("loss", settings.name, kLosses);
}

}  // namespace dpt::nn
