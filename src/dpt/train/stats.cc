#include "dpt/train/stats.h"

#include <cmath>
#include <stdexcept>

namespace dpt::train {

void check_finite_loss(const StepResult& step, int epoch, int64_t step_index, float lr) {
  if (std::isfinite(step.loss_sum)) return;
  throw std::runtime_error("training diverged: the loss became " + std::to_string(step.loss_sum) + " in epoch " +
                           std::to_string(epoch) + ", step " + std::to_string(step_index) + "; lower --lr (now " +
                           std::to_string(lr) + ")");
}

EpochStats epoch_stats(int epoch, const StepResult& sum, double seconds) {
  EpochStats stats;
  stats.epoch = epoch;
  stats.seconds = seconds;
  stats.train_loss = sum.mean_loss();
  stats.train_acc = sum.accuracy();
  stats.examples_per_sec = static_cast<double>(sum.examples) / seconds;
  return stats;
}

}  // namespace dpt::train
