// What one data-parallel training step saw, summed over the global batch.
#pragma once

#include <cstdint>

namespace dpt::parallel {

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

}  // namespace dpt::parallel
