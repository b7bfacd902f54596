// What one epoch of training showed: reporters print, log and plot these, and checkpoints
// keep the history of them.
#pragma once

#include <cstdint>

namespace dpt::checkpoint {

struct EpochStats {
  int epoch = 0;  // 1-based
  double train_loss = 0;
  double train_acc = 0;
  double test_acc = 0;
  double seconds = 0;  // training only, as the lesson times it
  double examples_per_sec = 0;
  double eval_seconds = 0;  // the test-set evaluation after the epoch, timed apart
  // The bytes this process's devices received from the other replicas during the epoch
  // (the gradient, buffer and control collectives), within the process and between the
  // processes (the network). For the metrics; checkpoints do not keep them.
  int64_t bytes_within_process = 0;
  int64_t bytes_between_processes = 0;
};

}  // namespace dpt::checkpoint
