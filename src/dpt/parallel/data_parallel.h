// DataParallel: the concise API's wrapper that trains any Module on N devices. It keeps
// one replica per device (the module itself on the first, deep copies on the others),
// scatters each batch over the devices, runs forward and backward on all of them at
// once, and allreduces the gradients, so every replica ends the step holding the
// gradient of the mean loss over the whole batch.
//
// BatchNorm: while training, each replica normalizes with the statistics of its own
// shard (as PyTorch's DistributedDataParallel without SyncBatchNorm); after every step
// the running statistics are averaged over the replicas, so all replicas evaluate alike.
//
// Multi-process (options.process_group, e.g. under mpirun): this process holds one device,
// the ranks are the job's processes, each batch passed in is this process's shard of the
// global batch (a sharded data::BatchLoader), and the figures returned are the whole job's.
// With options.bucket_mb > 0 the gradients are allreduced in buckets while backward runs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dpt/data/dataset.h"
#include "dpt/data/loader.h"
#include "dpt/nn/module.h"
#include "dpt/parallel/replica_group.h"

namespace dpt::parallel {

using DataParallelOptions = ReplicaGroupOptions;

class DataParallel {
 public:
  DataParallel(std::unique_ptr<nn::Module> module, std::vector<Device> devices, const std::string& allreduce = "ring",
               int cores = available_cores());
  DataParallel(std::unique_ptr<nn::Module> module, std::vector<Device> devices, DataParallelOptions options);

  // Forward, summed cross-entropy and backward of (X, y) split over the devices, then
  // the gradient allreduce scaled by 1 / batch, and the running-statistics average. A
  // batch of B < N examples (an epoch's last) runs on the first B devices alone. The
  // gradients are this batch's alone: any earlier ones are zeroed first.
  // Gradient accumulation: with GradientSync::later the gradients are kept, unreduced, and
  // the next call adds to them; the next call with GradientSync::now allreduces the sum
  // scaled by 1 / (the examples of every call since the last allreduce): the gradient of
  // the mean loss over all their examples, as one call on their concatenation.
  StepResult forward_backward(const Tensor& X, const Tensor& y, GradientSync sync = GradientSync::now);
  // The same for a batch from a data::BatchLoader: in a multi-process job, this process's
  // shard of a global batch of batch.global_size examples (possibly an empty shard).
  StepResult forward_backward(const data::Batch& batch, GradientSync sync = GradientSync::now);
  // Both read the step's figures back at once (on a GPU: wait for it). The training loop
  // instead queues its steps and reads the figures every few steps (ReplicaGroup):
  // forward_backward without the read; the figures wait in the ledgers for read_ledger.
  void queue_forward_backward(const data::Batch& batch, GradientSync sync = GradientSync::now);
  void check_finite(int64_t tag) { group_->check_finite(tag); }
  StepLedger read_ledger() { return group_->read_ledger(); }

  // Predictions right over `data`, each batch split across the devices as above (in a
  // multi-process job across the processes, and the counts summed). In eval mode, on CPU
  // devices, each replica evaluates a copy with its BatchNorms folded into the convolutions
  // before them (nn/fold.h: equal up to float rounding, one pass over the activations less
  // per BatchNorm; ResNet-18 evaluates about 1.1x faster), unless set_fold_batch_norm(false).
  int64_t count_correct(const data::Dataset& data, int64_t batch_size);
  // The confusion matrix over `data`, row-major [classes x classes], entry (true label,
  // predicted class), evaluated as count_correct is (parallel::confusion_split).
  std::vector<int64_t> confusion_matrix(const data::Dataset& data, int64_t batch_size, int64_t classes);
  void set_fold_batch_norm(bool on) { fold_batch_norm_ = on; }

  // One parameter list per replica, in the same order: what optim::SGD steps.
  std::vector<std::vector<Tensor>> replica_parameters() const;
  nn::Module& module() { return *modules_[0]; }
  const nn::Module& replica(size_t i) const { return *modules_[i]; }
  const std::vector<Device>& devices() const { return group_->devices(); }
  const ProcessGroup& process_group() const { return group_->process_group(); }
  Communicator& communicator() { return group_->communicator(); }
  ReplicaGroup& group() { return *group_; }
  // The bucketer of local device `i` (null when bucket_mb is 0).
  const GradientBucketer* bucketer(size_t i) const { return group_->bucketer(i); }
  void train(bool on = true);
  void eval() { train(false); }

 private:
  // `number`: the batch's number in the run (data::Batch::number; -1: count the calls).
  void step(const std::vector<Shard>& shards, int64_t global_batch, int64_t number, GradientSync sync);
  bool fold_batch_norm_ = true;

  std::vector<std::unique_ptr<nn::Module>> modules_;  // one replica per device
  std::unique_ptr<ReplicaGroup> group_;
  int64_t accumulated_examples_ = 0;  // of the GradientSync::later calls since the last allreduce
  int64_t calls_ = 0;                 // steps taken: the step number of batches without one
};

}  // namespace dpt::parallel
