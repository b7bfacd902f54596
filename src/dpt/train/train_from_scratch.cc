#include "dpt/train/train_from_scratch.h"

#include <cmath>
#include <stdexcept>

#include "dpt/autograd/node.h"
#include "dpt/checkpoint/checkpoint.h"
#include "dpt/data/loader.h"
#include "dpt/nn/lenet.h"
#include "dpt/ops/ops.h"
#include "dpt/optim/sgd.h"
#include "dpt/parallel/allreduce.h"
#include "dpt/parallel/replicate.h"
#include "dpt/train/timer.h"

namespace dpt::train {

void validate(const ScratchConfig& config) {
  if (config.epochs < 1)
    throw std::invalid_argument("--epochs must be at least 1, got " + std::to_string(config.epochs));
  if (config.batch_size < 1) {
    throw std::invalid_argument("--batch-size must be positive, got " + std::to_string(config.batch_size));
  }
  optim::check_learning_rate(config.lr);
  if (config.devices.empty()) throw std::invalid_argument("--devices names no device");
  if (config.batch_size < static_cast<int64_t>(config.devices.size())) {
    throw std::invalid_argument("--batch-size " + std::to_string(config.batch_size) + " is smaller than the " +
                                std::to_string(config.devices.size()) +
                                " devices: every device needs at least one example per batch");
  }
}

namespace {
const ScratchConfig& validated(const ScratchConfig& config) {
  validate(config);
  return config;
}
}  // namespace

ScratchTrainer::ScratchTrainer(const ScratchConfig& config, const std::vector<Tensor>& initial_params)
    : config_(validated(config)),
      pool_(config.devices, config.cores),
      comm_(parallel::make_in_process_communicator(config.allreduce, static_cast<int>(config.devices.size()))),
      grad_buffers_(config.devices.size()) {
  for (const Device& device : config.devices) device_params_.push_back(parallel::replicate(initial_params, device));
  // One failing device must release its peers from the allreduce instead of hanging them.
  pool_.set_abort_hook([this] { comm_->abort("another device failed during the step"); });
}

StepResult ScratchTrainer::compute_gradients(const Tensor& X, const Tensor& y) {
  const std::vector<parallel::Shard> shards = parallel::split_batch(X, y, devices());
  std::vector<StepResult> per_device(shards.size());
  pool_.run_all([&](int rank) {
    const parallel::Shard& shard = shards[rank];
    const std::vector<Tensor>& params = device_params_[rank];
    for (const Tensor& p : params) p.zero_grad();
    const Tensor logits = nn::lenet(shard.X, params);
    const Tensor loss = ops::cross_entropy(logits, shard.y, ops::Reduction::sum);
    loss.backward();
    parallel::allreduce_gradients(*comm_, rank, params, grad_buffers_[rank]);
    per_device[rank] = {loss.item(), ops::count_correct(logits.detach(), shard.y), shard.X.dim(0)};
  });
  pending_batch_ = X.dim(0);
  StepResult total;
  for (const StepResult& part : per_device) total += part;
  return total;
}

std::vector<std::pair<std::string, Tensor>> ScratchTrainer::named_gradients() const {
  std::vector<std::pair<std::string, Tensor>> grads;
  for (const Tensor& p : device_params_[0]) grads.emplace_back(p.name(), p.grad());
  return grads;
}

void ScratchTrainer::apply_update() {
  // Every replica applies the same summed gradient, scaled by the global batch size.
  pool_.run_all([&](int rank) { optim::sgd(device_params_[rank], config_.lr, pending_batch_); });
}

StepResult ScratchTrainer::train_batch(const Tensor& X, const Tensor& y) {
  const StepResult result = compute_gradients(X, y);
  apply_update();
  return result;
}

std::vector<std::string> ScratchTrainer::device_names() const {
  std::vector<std::string> names;
  for (const Device& d : devices()) names.push_back(d.str());
  return names;
}

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
  if (!from.buffers.empty() || !from.momentum.empty()) {
    throw checkpoint::CheckpointError("checkpoint " + source +
                                      " holds buffers or momentum, which the from-scratch LeNet has none of; "
                                      "it was written by --api concise");
  }
}

double ScratchTrainer::evaluate_accuracy(const data::Dataset& data, int64_t batch_size) {
  int64_t correct = 0;
  pool_.run_on(0, [&] {
    autograd::NoGradGuard no_grad;
    data::BatchLoader loader(data, batch_size, /*shuffle=*/false, 0);
    loader.start_epoch(0);
    data::Batch batch;
    while (loader.next(batch)) correct += ops::count_correct(nn::lenet(batch.images, device_params_[0]), batch.labels);
  });
  return static_cast<double>(correct) / static_cast<double>(data.size());
}

TrainSummary train_lenet_from_scratch(const data::Dataset& train_data, const data::Dataset& test_data,
                                      const ScratchConfig& config, const EpochCallback& on_epoch,
                                      const StepCallback& on_step) {
  validate(config);
  ScratchTrainer trainer(config, nn::lenet_params(config.seed));
  const LoopSettings settings{config.epochs, config.batch_size, config.seed, config.lr, kScratchModelName};
  const LoopResult result = run_training(trainer, train_data, test_data, settings, config.run, on_epoch, on_step);
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
