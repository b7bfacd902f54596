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
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/process_group.h"
#include "dpt/parallel/replicate.h"
#include "dpt/parallel/split_evaluation.h"
#include "dpt/train/config.h"
#include "dpt/train/timer.h"

namespace dpt::train {

namespace {
const ScratchConfig& validated(const ScratchConfig& config) {
  validate(config);
  return config;
}
}  // namespace

ScratchTrainer::ScratchTrainer(const ScratchConfig& config, const std::vector<Tensor>& initial_params)
    : config_(validated(config)),
      pool_(config.devices, config.cores),
      comm_(config.process_group.distributed() ? config.process_group.comm
                                               : parallel::make_communicator(config.devices, config.allreduce)),
      grad_buffers_(config.devices.size()) {
  for (const Device& device : config.devices) device_params_.push_back(parallel::replicate(initial_params, device));
  if (const size_t bytes = parallel::bucket_bytes_from_mb(config.bucket_mb); bytes > 0) {
    for (size_t i = 0; i < device_params_.size(); ++i) {
      bucketers_.push_back(std::make_unique<parallel::GradientBucketer>(*comm_, global_rank(static_cast<int>(i)),
                                                                        device_params_[i], bytes));
    }
  }
  // One failing device must release its peers from the allreduce instead of hanging them.
  pool_.set_abort_hook([this] { comm_->abort("another device failed during the step"); });
  if (config_.process_group.distributed()) {
    // Every process starts from rank 0's parameters, whatever each initialised.
    pool_.run_on(0, [&] {
      for (const Tensor& p : device_params_[0]) comm_->broadcast(global_rank(0), p.data<float>(), p.numel(), 0);
    });
  }
}

StepResult ScratchTrainer::compute_gradients(const Tensor& X, const Tensor& y) {
  if (config_.process_group.distributed()) {
    throw std::logic_error("ScratchTrainer: in a multi-process job pass the batches of a sharded BatchLoader");
  }
  return run_step(parallel::split_batch(X, y, devices()), X.dim(0));
}

StepResult ScratchTrainer::compute_batch_gradients(const data::Batch& batch) {
  const parallel::ProcessGroup& group = config_.process_group;
  if (!group.distributed()) return compute_gradients(batch.images, batch.labels);
  if (batch.global_size < group.size()) {  // as split_batch refuses it on N devices
    throw std::invalid_argument("a batch of " + std::to_string(batch.global_size) + " examples cannot be split over " +
                                std::to_string(group.size()) + " processes; use a `batch_size` and `train_limit` " +
                                "that leave every process at least one example per batch");
  }
  const StepResult local = run_step({{batch.images, batch.labels}}, batch.global_size);
  // Every process reports the job's figures, as one process on N devices would.
  float figures[3] = {static_cast<float>(local.loss_sum), static_cast<float>(local.correct),
                      static_cast<float>(local.examples)};
  comm_->allreduce_sum(group.rank, figures, 3);
  return {figures[0], static_cast<int64_t>(figures[1]), static_cast<int64_t>(figures[2])};
}

StepResult ScratchTrainer::run_step(const std::vector<parallel::Shard>& shards, int64_t global_batch) {
  std::vector<StepResult> per_device(shards.size());
  pool_.run_all([&](int rank) {
    const parallel::Shard& shard = shards[rank];
    const std::vector<Tensor>& params = device_params_[rank];
    for (const Tensor& p : params) p.zero_grad();
    Tensor logits, loss;
    const auto forward_backward = [&] {
      logits = nn::lenet(shard.X, params);
      loss = ops::cross_entropy(logits, shard.y, ops::Reduction::sum);
      loss.backward();
    };
    if (bucketers_.empty()) {
      forward_backward();
      parallel::allreduce_gradients(*comm_, global_rank(rank), params, grad_buffers_[rank]);
    } else {
      bucketers_[rank]->backward_and_allreduce(forward_backward, 1.0f);  // sums allreduced while backward runs
    }
    per_device[rank] = {loss.item(), ops::count_correct(logits.detach(), shard.y), shard.X.dim(0)};
  });
  pending_batch_ = global_batch;
  StepResult total;
  for (const StepResult& part : per_device) total += part;
  return total;
}

std::pair<int64_t, int64_t> ScratchTrainer::data_shard() const {
  return {config_.process_group.rank, config_.process_group.size()};
}

int ScratchTrainer::agree_on_stop(int signal) { return parallel::agree_on_stop(config_.process_group, signal); }

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
  return parallel::device_names(devices(), config_.process_group);
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
                                      "it was written by `api` concise");
  }
}

double ScratchTrainer::evaluate_accuracy(const data::Dataset& data, int64_t batch_size) {
  const int64_t correct =
      parallel::count_correct_split(pool_, *comm_, config_.process_group, data, batch_size,
                                    [&](int device, const Tensor& X) { return nn::lenet(X, device_params_[device]); });
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
