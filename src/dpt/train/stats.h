// The figures the training loops report: a step's (parallel::StepResult, what the replica
// engine returns) and an epoch's (checkpoint::EpochStats, what checkpoints keep).
#pragma once

#include "dpt/checkpoint/epoch_stats.h"
#include "dpt/parallel/step_result.h"

namespace dpt::train {

using StepResult = parallel::StepResult;
using EpochStats = checkpoint::EpochStats;

// The epoch's figures from the sum of its steps and its training time (test_acc is left 0).
EpochStats epoch_stats(int epoch, const StepResult& sum, double seconds);

}  // namespace dpt::train
