// The figures the training loops report.
#pragma once

#include <cstdint>
#include <string>

namespace dpt::train {

// What one training step saw, summed over the global batch.
struct StepResult {
  double loss_sum = 0;  // summed loss
  int64_t correct = 0;  // examples predicted right
  int64_t examples = 0;

  double mean_loss() const { return loss_sum / static_cast<double>(examples); }
  double accuracy() const { return static_cast<double>(correct) / static_cast<double>(examples); }

  StepResult& operator+=(const StepResult& other) {
    loss_sum += other.loss_sum;
    correct += other.correct;
    examples += other.examples;
    return *this;
  }
};

// What one epoch of training showed; reporters print, log and plot these.
struct EpochStats {
  int epoch = 0;  // 1-based
  double train_loss = 0;
  double train_acc = 0;
  double test_acc = 0;
  double seconds = 0;  // training only, as the lesson times it
  double examples_per_sec = 0;
  double eval_seconds = 0;  // the test-set evaluation after the epoch, timed apart
};

// The epoch's figures from the sum of its steps and its training time (test_acc is left 0).
EpochStats epoch_stats(int epoch, const StepResult& sum, double seconds);

}  // namespace dpt::train
