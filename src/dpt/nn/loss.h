// Losses as a parameter of the training step: the replica engine (parallel::ReplicaGroup,
// DataParallel, the scratch trainer) calls the one it is given on every shard, and holds
// none of its own. A loss is summed over the shard's examples: the engine then scales the
// allreduced gradient by 1 / (the global batch), so every device count gives the gradient
// of the mean loss over the whole batch.
//
// Subclass Loss for your own: sum() is differentiable through dpt::ops, and sees outputs
// [n, ...] and int64 class labels [n] on the same device.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "dpt/core/tensor.h"

namespace dpt::nn {

class Loss {
 public:
  virtual ~Loss() = default;
  virtual std::string name() const = 0;
  // The loss summed over the examples of `outputs` (shape [1]). Throws
  // std::invalid_argument naming the shapes when outputs and labels disagree.
  virtual Tensor sum(const Tensor& outputs, const Tensor& labels) const = 0;
};

// Softmax cross-entropy of logits [n, K] against labels in [0, K), with label smoothing s
// in [0, 1) as torch.nn.CrossEntropyLoss(label_smoothing=s): target (1 - s) onehot + s / K.
class CrossEntropyLoss final : public Loss {
 public:
  explicit CrossEntropyLoss(float label_smoothing = 0.0f);
  std::string name() const override;
  Tensor sum(const Tensor& outputs, const Tensor& labels) const override;
  float label_smoothing() const { return label_smoothing_; }

 private:
  float label_smoothing_;
};

// Mean squared error of outputs [n, K] against the one-hot code of each label (per example
// the mean over K; torch.nn.MSELoss on one-hot targets, summed over the examples). The
// targets are built on the host from the labels (copied back from a GPU).
class MSELoss final : public Loss {
 public:
  std::string name() const override { return "mse"; }
  Tensor sum(const Tensor& outputs, const Tensor& labels) const override;
};

// The losses make_loss builds, by name: "cross-entropy" (the default) and "mse".
inline constexpr std::array<std::string_view, 2> kLosses{"cross-entropy", "mse"};

struct LossSettings {
  std::string name = "cross-entropy";
  float label_smoothing = 0.0f;  // cross-entropy only
};

// Throws ConfigError (`loss`) naming the choices for an unknown name (core/config_error.h's
// bad_choice, as every setting chosen by name), and std::invalid_argument naming the fix
// for label smoothing given to a loss that has none or outside [0, 1).
std::unique_ptr<Loss> make_loss(const LossSettings& settings);

}  // namespace dpt::nn
