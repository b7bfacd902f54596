// The concise lesson's train(net, train_iter, test_iter, num_epochs, lr, devices) for any
// module wrapped in DataParallel: each epoch trains over shuffled minibatches (timing
// only the training), accumulates train loss and accuracy, then evaluates test accuracy
// on all devices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/data/dataset.h"
#include "dpt/optim/lr_schedule.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/train/stats.h"
#include "dpt/train/training_loop.h"

namespace dpt::train {

struct TrainHistory {
  std::vector<EpochStats> epochs;  // every epoch, a resumed checkpoint's included
  double examples_per_sec = 0;     // over this invocation's training time
  int64_t skipped_steps = 0;       // on_nan skip
};

// Trains `net` with `optimizer`, whose learning rate is the schedule's base, as `options`
// say. Throws std::invalid_argument when `optimizer` does not step `net`'s replica parameters.
TrainHistory train(parallel::DataParallel& net, optim::Optimizer& optimizer, const data::Dataset& train_data,
                   const data::Dataset& test_data, const TrainOptions& options, const EpochCallback& on_epoch = {},
                   const StepCallback& on_step = {});

}  // namespace dpt::train
