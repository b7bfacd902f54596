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
  if (config.epochs < 1)
    throw std::invalid_argument("--epochs must be at least 1, got " + std::to_string(config.epochs));
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
      check_finite_loss(result, epoch + 1, step + 1, optimizer.options().lr);
      optimizer.step();
      sum += result;
      ++step;
      if (on_step) on_step(epoch + 1, step, loader.num_batches(), sum.mean_loss(), sum.accuracy());
    }
    EpochStats stats = epoch_stats(epoch + 1, sum, timer.stop());
    examples_trained += sum.examples;
    net.eval();
    stats.test_acc =
        static_cast<double>(net.count_correct(test_data, config.batch_size)) / static_cast<double>(test_data.size());
    history.epochs.push_back(stats);
    if (on_epoch) on_epoch(stats);
  }
  net.train();
  history.examples_per_sec = static_cast<double>(examples_trained) / timer.sum();
  return history;
}

}  // namespace dpt::train
