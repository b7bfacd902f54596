// The concise lesson's train(net, train_iter, test_iter, num_epochs, lr, devices) for any
// module wrapped in DataParallel: each epoch trains over shuffled minibatches (timing
// only the training), accumulates train loss and accuracy, then evaluates test accuracy
// on all devices.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dpt/data/fashion_mnist.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/train/stats.h"
#include "dpt/train/train_from_scratch.h"

namespace dpt::train {

struct ConciseConfig {
  int epochs = 10;
  int64_t batch_size = 256;
  uint64_t seed = 0;  // shuffling
};

struct TrainHistory {
  std::vector<EpochStats> epochs;
  double examples_per_sec = 0;  // over all epochs' training time
};

TrainHistory train(parallel::DataParallel& net, optim::SGD& optimizer, const data::Dataset& train_data,
                   const data::Dataset& test_data, const ConciseConfig& config, const EpochCallback& on_epoch = {},
                   const StepCallback& on_step = {});

}  // namespace dpt::train
