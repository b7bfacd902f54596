#include "dpt/train/train_from_scratch.h"

#include <cmath>
#include <stdexcept>

#include "dpt/checkpoint/checkpoint.h"
#include "dpt/nn/lenet.h"
#include "dpt/ops/ops.h"
#include "dpt/optim/sgd.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/replicate.h"
#include "dpt/train/config.h"

namespace dpt::train {

namespace {
const ScratchConfig& validated(const ScratchConfig& config) {
  validate(config);
  return config;
}

std::vector<parallel::ReplicaTensors> as_replicas(const std::vector<std::vector<Tensor>>& device_params) {
  std::vector<parallel::ReplicaTensors> replicas;
  for (const std::vector<Tensor>& params : device_params) replicas.push_back({params, {}});
  return replicas;
}

std::vector<std::vector<Tensor>> replicate_to(const std::vector<Tensor>& params, const std::vector<Device>& devices) {
  std::vector<std::vector<Tensor>> device_params;
  for (const Device& device : devices) device_params.push_back(parallel::replicate(params, device));
  return device_params;
}
}  // namespace

ScratchTrainer::ScratchTrainer(const ScratchConfig& config, const std::vector<Tensor>& initial_params)
    : config_(validated(config)),
      device_params_(replicate_to(initial_params, config.devices)),
      group_(config.devices, as_replicas(device_params_), config.engine),
      lr_(config.lr) {}

StepResult ScratchTrainer::compute_gradients(const Tensor& X, const Tensor& y) {
  run_step(group_.scatter(X, y), X.dim(0));
  return group_.read_ledger().figures;
}

void ScratchTrainer::compute_batch_gradients(const data::Batch& batch, parallel::GradientSync sync) {
  const int64_t global_batch = batch.global_size > 0 ? batch.global_size : batch.labels.dim(0);
  run_step(group_.scatter(batch), global_batch, sync);
}

void ScratchTrainer::run_step(const std::vector<parallel::Shard>& shards, int64_t global_batch,
                              parallel::GradientSync sync) {
  const auto forward = [&](int device, const parallel::Shard& shard) {
    Tensor logits = nn::lenet(shard.X, device_params_[device]);
    Tensor loss = parallel::shard_loss_sum(logits, shard, group_.options().loss.get());
    return parallel::ShardOutput{logits, loss};
  };
  // Accumulated micro-batches add up: sgd divides their summed gradient by all their examples.
  if (!group_.holds_unreduced_gradients()) pending_batch_ = 0;
  group_.step(shards, global_batch, forward, 1.0f, sync);
  pending_batch_ += global_batch;
}

std::pair<int64_t, int64_t> ScratchTrainer::data_shard() const {
  return {config_.engine.process_group.rank, config_.engine.process_group.size()};
}

int ScratchTrainer::agree_on_stop(int signal) { return group_.agree_on_stop(signal); }

std::vector<std::pair<std::string, Tensor>> ScratchTrainer::named_gradients() const {
  std::vector<std::pair<std::string, Tensor>> grads;
  for (const Tensor& p : device_params_[0]) grads.emplace_back(p.name(), p.grad());
  return grads;
}

void ScratchTrainer::apply_update() {
  // Every replica applies the same summed gradient, scaled by the global batch size.
  group_.update([&](int device) { optim::sgd(device_params_[device], lr_, pending_batch_); });
}

StepResult ScratchTrainer::train_batch(const Tensor& X, const Tensor& y) {
  const StepResult result = compute_gradients(X, y);
  apply_update();
  return result;
}

std::vector<std::string> ScratchTrainer::device_names() const { return group_.device_names(); }

namespace {
std::vector<std::pair<std::string, Tensor>> named(const std::vector<Tensor>& params) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const Tensor& p : params) out.emplace_back(p.name(), p);
  return out;
}
}  // namespace

void ScratchTrainer::save_state(checkpoint::Checkpoint& into) const {
  for (const Tensor& p : device_params_[0]) into.params.push_back(checkpoint::to_named(p.name(), p));
}

void ScratchTrainer::load_state(const checkpoint::Checkpoint& from, const std::string& source) {
  // Parameters are device-independent: every replica, however many, gets the same copy.
  for (const std::vector<Tensor>& replica : device_params_)
    checkpoint::copy_into(from.params, named(replica), "parameters", source);
  if (!from.buffers.empty() || !from.optimizer_state.empty()) {
    throw checkpoint::CheckpointError("checkpoint " + source +
                                      " holds buffers or momentum, which the from-scratch LeNet has none of; "
                                      "it was written by `api` concise");
  }
}

double ScratchTrainer::evaluate_accuracy(const data::Dataset& data, int64_t batch_size) {
  const int64_t correct =
      group_.count_correct(data, batch_size, [&](int device, const Tensor& X) { return nn::lenet(X, device_params_[device]); });
  return static_cast<double>(correct) / static_cast<double>(data.size());
}

TrainSummary train_lenet_from_scratch(const data::Dataset& train_data, const data::Dataset& test_data,
                                      const ScratchConfig& config, const EpochCallback& on_epoch,
                                      const StepCallback& on_step) {
  validate(config);
  ScratchTrainer trainer(config, nn::lenet_params(config.training.seed, train_data.shape(), train_data.num_classes()));
  TrainOptions options = config.training;
  options.model = kScratchModelName;
  const LoopResult result = run_training(trainer, train_data, test_data, options, config.lr, on_epoch, on_step);
  TrainSummary summary;
  summary.history = result.history;
  summary.skipped_steps = result.skipped_steps;
  summary.params = trainer.device_params()[0];
  if (!result.history.empty()) summary.test_acc = result.history.back().test_acc;
  for (const EpochStats& e : result.history)
    summary.sec_per_epoch += e.seconds / static_cast<double>(result.history.size());
  return summary;
}

}  // namespace dpt::train
