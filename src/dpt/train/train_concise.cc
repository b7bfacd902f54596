#include "dpt/train/train_concise.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "dpt/data/loader.h"
#include "dpt/train/timer.h"

namespace dpt::train {

TrainHistory train(parallel::DataParallel& net, optim::SGD& optimizer, const data::Dataset& train_data,
                   const data::Dataset& test_data, const ConciseConfig& config, const EpochCallback& on_epoch,
                   const StepCallback& on_step) {
  if (config.epochs < 1) throw std::invalid_argument("--epochs must be at least 1, got " + std::to_string(config.epochs));
  data::BatchLoader loader(train_data, config.batch_size, /*shuffle=*/true, config.seed);
  Timer timer;
  TrainHistory history;
  int64_t examples_trained = 0;
  for (int epoch = 0; epoch < config.epochs; ++epoch) {
    net.train();
    timer.start();
    loader.start_epoch(epoch);
    data::Batch batch;
    StepResult sum;
    int64_t step = 0;
    while (loader.next(batch)) {
      optimizer.zero_grad();
      const StepResult result = net.forward_backward(batch.images, batch.labels);
      if (!std::isfinite(result.loss_sum)) {
        throw std::runtime_error("training diverged: the loss became " + std::to_string(result.loss_sum) +
                                 " in epoch " + std::to_string(epoch + 1) + ", step " + std::to_string(step + 1) +
                                 "; lower --lr (now " + std::to_string(optimizer.options().lr) + ")");
      }
      optimizer.step();
      sum += result;
      ++step;
      if (on_step) {
        on_step(epoch + 1, step, loader.num_batches(), sum.loss_sum / static_cast<double>(sum.examples),
                static_cast<double>(sum.correct) / static_cast<double>(sum.examples));
      }
    }
    EpochStats stats;
    stats.seconds = timer.stop();
    examples_trained += sum.examples;
    stats.epoch = epoch + 1;
    stats.train_loss = sum.loss_sum / static_cast<double>(sum.examples);
    stats.train_acc = static_cast<double>(sum.correct) / static_cast<double>(sum.examples);
    stats.examples_per_sec = static_cast<double>(sum.examples) / stats.seconds;
    net.eval();
    stats.test_acc = static_cast<double>(net.count_correct(test_data, config.batch_size)) /
                     static_cast<double>(test_data.size());
    history.epochs.push_back(stats);
    if (on_epoch) on_epoch(stats);
  }
  net.train();
  history.examples_per_sec = static_cast<double>(examples_trained) / timer.sum();
  return history;
}

}  // namespace dpt::train
