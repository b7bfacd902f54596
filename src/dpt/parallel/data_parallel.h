// DataParallel: the concise API's wrapper that trains any Module on N devices. It keeps
// one replica per device (the module itself on the first, deep copies on the others),
// scatters each batch over the devices, runs forward and backward on all of them at
// once, and allreduces the gradients, so every replica ends the step holding the
// gradient of the mean loss over the whole batch.
//
// BatchNorm: while training, each replica normalizes with the statistics of its own
// shard (as PyTorch's DistributedDataParallel without SyncBatchNorm); after every step
// the running statistics are averaged over the replicas, so all replicas evaluate alike.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dpt/data/fashion_mnist.h"
#include "dpt/nn/module.h"
#include "dpt/parallel/communicator.h"
#include "dpt/parallel/device_pool.h"
#include "dpt/train/stats.h"

namespace dpt::parallel {

class DataParallel {
 public:
  DataParallel(std::unique_ptr<nn::Module> module, std::vector<Device> devices, const std::string& allreduce = "ring",
               int cores = available_cores());

  // Forward, summed cross-entropy and backward of (X, y) split over the devices, then
  // the gradient allreduce scaled by 1 / batch, and the running-statistics average. A
  // batch of B < N examples (an epoch's last) runs on the first B devices alone. The
  // gradients are this batch's alone: any earlier ones are zeroed first.
  train::StepResult forward_backward(const Tensor& X, const Tensor& y);

  // Predictions right over `data`, each batch split across the devices as above.
  int64_t count_correct(const data::Dataset& data, int64_t batch_size);

  // One parameter list per replica, in the same order: what optim::SGD steps.
  std::vector<std::vector<Tensor>> replica_parameters() const;
  nn::Module& module() { return *replicas_[0]; }
  const nn::Module& replica(size_t i) const { return *replicas_[i]; }
  const std::vector<Device>& devices() const { return pool_.devices(); }
  void train(bool on = true);
  void eval() { train(false); }

 private:
  DevicePool pool_;
  std::unique_ptr<Communicator> comm_;
  std::vector<std::unique_ptr<nn::Module>> replicas_;
  std::vector<std::vector<float>> flat_buffers_;  // one per device, reused every step
};

}  // namespace dpt::parallel
