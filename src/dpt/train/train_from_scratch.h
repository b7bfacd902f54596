// The lesson's multi-device training from scratch, step by step:
//   replicate the parameters to every device, split each minibatch over the devices,
//   forward + loss + backward on every device in parallel (one worker thread each),
//   allreduce the gradients, and apply the same SGD step on every replica.
// With one device this is plain minibatch SGD; with N it computes the same update.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpt/core/tensor.h"
#include "dpt/data/dataset.h"
#include "dpt/nn/loss.h"
#include "dpt/ops/precision.h"
#include "dpt/optim/lr_schedule.h"
#include "dpt/parallel/communicator.h"
#include "dpt/parallel/device_pool.h"
#include "dpt/parallel/process_group.h"
#include "dpt/parallel/replica_group.h"
#include "dpt/train/stats.h"
#include "dpt/train/training_loop.h"

namespace dpt::train {

struct ScratchConfig {
  TrainOptions training;  // epochs, batch, seed (parameter init and shuffling), schedule, run options
  float lr = 0.2f;        // the lesson's sgd(params, lr, batch_size): the schedule's base
  std::vector<Device> devices{Device::cpu(0)};
  // How the devices compute and communicate, as the concise API's DataParallelOptions:
  // allreduce, cores, buckets, the process group (--dist mpi), deterministic chunks, the
  // loss and the execution options (parallel/replica_group.h). No sync_bn: LeNet has none.
  parallel::ReplicaGroupOptions engine;
};

// The lesson's steps as thin calls into the replica engine (parallel::ReplicaGroup), which
// holds the device workers, the communicator and one parameter replica per device.
class ScratchTrainer : public Trainable {
 public:
  ScratchTrainer(const ScratchConfig& config, const std::vector<Tensor>& initial_params);

  // The lesson's train_batch: one SGD step on the global minibatch (X, y), i.e.
  // compute_gradients then apply_update.
  StepResult train_batch(const Tensor& X, const Tensor& y);

  // Accuracy on `data`, each test batch split over the devices as a training batch is (the
  // lesson evaluates on device 0 alone; all replicas are equal, so the count is the same up to float rounding of the
  // logits).
  double evaluate_accuracy(const data::Dataset& data, int64_t batch_size);

  // Trainable, for the shared training loop.
  StepResult compute_gradients(const Tensor& X, const Tensor& y) override;
  void compute_batch_gradients(const data::Batch& batch, parallel::GradientSync sync) override;
  void check_finite(int64_t tag) override { group_.check_finite(tag); }
  parallel::StepLedger read_ledger() override { return group_.read_ledger(); }
  bool ledger_reads_are_free() const override { return group_.ledger_reads_are_free(); }
  std::pair<int64_t, int64_t> data_shard() const override;
  int64_t deterministic_chunk() const override { return config_.engine.deterministic_chunk; }
  const parallel::ProcessGroup& process_group() const override { return config_.engine.process_group; }
  parallel::WireBytes wire_bytes() const override { return group_.wire_bytes(); }
  int agree_on_stop(int signal) override;
  std::vector<std::pair<std::string, Tensor>> named_gradients() const override;
  void apply_update() override;
  // The lesson's sgd takes its lr per call: the next apply_update's.
  void set_learning_rate(float lr) override { lr_ = lr; }
  double evaluate(const data::Dataset& data, int64_t batch_size) override {
    return evaluate_accuracy(data, batch_size);
  }
  std::vector<std::string> device_names() const override;
  void save_state(checkpoint::Checkpoint& into) const override;
  void load_state(const checkpoint::Checkpoint& from, const std::string& source) override;

  const std::vector<std::vector<Tensor>>& device_params() const { return device_params_; }
  const std::vector<Device>& devices() const { return group_.devices(); }
  parallel::Communicator& communicator() { return group_.communicator(); }

 private:
  // The lesson's step on the shards of one global batch: forward, summed loss and backward
  // on every device, then the gradient allreduce (a sum: sgd divides by the batch).
  void run_step(const std::vector<parallel::Shard>& shards, int64_t global_batch,
                parallel::GradientSync sync = parallel::GradientSync::now);

  ScratchConfig config_;
  std::vector<std::vector<Tensor>> device_params_;  // the lesson's replicate(): one per device
  parallel::ReplicaGroup group_;
  int64_t pending_batch_ = 0;  // global batch of the gradients not yet applied (all accumulated micro-batches)
  float lr_;                   // of the next apply_update
};

struct TrainSummary {
  double test_acc = 0;
  double sec_per_epoch = 0;
  std::vector<Tensor> params;       // replica 0 after the last epoch
  std::vector<EpochStats> history;  // every epoch, a resumed checkpoint's included
  int64_t skipped_steps = 0;        // --on-nan skip
};

// What checkpoints of the from-scratch loop record as their model.
inline constexpr const char* kScratchModelName = "lenet (scratch API)";

// The lesson's train(num_gpus, batch_size, lr) for LeNet on a data set; calls on_epoch
// after each epoch. config.training.run adds checkpoints, resuming, the NaN policy and
// stopping; config.training.model is ignored (checkpoints record kScratchModelName).
TrainSummary train_lenet_from_scratch(const data::Dataset& train_data, const data::Dataset& test_data,
                                      const ScratchConfig& config, const EpochCallback& on_epoch = {},
                                      const StepCallback& on_step = {});

}  // namespace dpt::train
