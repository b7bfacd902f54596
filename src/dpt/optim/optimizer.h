// optim::SGD, the optimizer of the concise API, with PyTorch's update rule:
//   g = grad + weight_decay * p;  v = momentum * v + g (v = g on the first step);  p -= lr * v
// It steps every replica of a data-parallel model: the replicas hold equal parameters and
// (after the allreduce) equal gradients, and each keeps its own momentum buffers, so
// every replica makes the same update.
#pragma once

#include <vector>

#include "dpt/core/tensor.h"

namespace dpt::optim {

struct SgdOptions {
  float lr = 0.1f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
};

class SGD {
 public:
  // One parameter list per replica, in the same order on every replica.
  SGD(std::vector<std::vector<Tensor>> replica_params, SgdOptions options);
  SGD(std::vector<Tensor> params, SgdOptions options)
      : SGD(std::vector<std::vector<Tensor>>{std::move(params)}, options) {}

  void step();
  void zero_grad();
  const SgdOptions& options() const { return options_; }
  // The learning rate of the next step() (a schedule sets it per step); throws ConfigError
  // (`lr`) for a negative or non-finite one.
  void set_lr(float lr);
  // The momentum buffer of parameter i of replica r (undefined before the first step).
  const Tensor& momentum_buffer(size_t replica, size_t i) const { return velocity_[replica][i]; }
  // Gives every replica a copy of `buffers` (one per parameter; undefined = not stepped
  // yet), as when resuming from a checkpoint, whatever the number of replicas that saved it.
  void load_momentum_buffers(const std::vector<Tensor>& buffers);

 private:
  std::vector<std::vector<Tensor>> params_;
  std::vector<std::vector<Tensor>> velocity_;
  SgdOptions options_;
};

}  // namespace dpt::optim
