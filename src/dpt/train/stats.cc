#include "dpt/train/stats.h"

#include <cmath>
#include <stdexcept>

namespace dpt::train {

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
