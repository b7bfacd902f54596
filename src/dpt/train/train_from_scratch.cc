#include "dpt/train/train_from_scratch.h"

#include <cmath>
#include <stdexcept>

#include "dpt/autograd/node.h"
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

StepResult ScratchTrainer::train_batch(const Tensor& X, const Tensor& y) {
  const std::vector<parallel::Shard> shards = parallel::split_batch(X, y, devices());
  std::vector<StepResult> per_device(shards.size());
  const int64_t global_batch = X.dim(0);
  pool_.run_all([&](int rank) {
    const parallel::Shard& shard = shards[rank];
    const std::vector<Tensor>& params = device_params_[rank];
    const Tensor logits = nn::lenet(shard.X, params);
    const Tensor loss = ops::cross_entropy(logits, shard.y, ops::Reduction::sum);
    loss.backward();
    parallel::allreduce_gradients(*comm_, rank, params, grad_buffers_[rank]);
    // Every replica applies the same summed gradient, scaled by the global batch size.
    optim::sgd(params, config_.lr, global_batch);
    per_device[rank] = {loss.item(), ops::count_correct(logits.detach(), shard.y), shard.X.dim(0)};
  });
  StepResult total;
  for (const StepResult& part : per_device) total += part;
  return total;
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
  data::BatchLoader loader(train_data, config.batch_size, /*shuffle=*/true, config.seed);
  Timer timer;
  double test_acc = 0;
  for (int epoch = 0; epoch < config.epochs; ++epoch) {
    timer.start();
    loader.start_epoch(epoch);
    data::Batch batch;
    StepResult sum;
    while (loader.next(batch)) {
      const StepResult step = trainer.train_batch(batch.images, batch.labels);
      check_finite_loss(step, epoch + 1, loader.batch_offset(), config.lr);
      sum += step;
      if (on_step) on_step(epoch + 1, loader.batch_offset(), loader.num_batches(), sum.mean_loss(), sum.accuracy());
    }
    EpochStats stats = epoch_stats(epoch + 1, sum, timer.stop());
    stats.test_acc = test_acc = trainer.evaluate_accuracy(test_data, config.batch_size);
    if (on_epoch) on_epoch(stats);
  }
  return {test_acc, timer.avg(), trainer.device_params()[0]};
}

}  // namespace dpt::train
