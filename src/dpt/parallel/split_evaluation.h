// Evaluation split like training: every device takes the rows of each test batch that
// split_batch would give it (in a multi-process job, each process its shard), and the
// correct counts are summed.
// Both training APIs evaluate through here, so N devices evaluate N times the examples at once.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dpt/core/device.h"
#include "dpt/core/tensor.h"
#include "dpt/data/dataset.h"
#include "dpt/parallel/communicator.h"
#include "dpt/parallel/device_pool.h"

namespace dpt::parallel {

// The devices a batch of `examples` is split over: all of them, or only the first
// `examples` when the batch is smaller (the last, partial batch of an epoch or of the test
// set, e.g. 10,000 test images in batches of 9,999 on 2 devices), so that it still runs.
std::vector<Device> devices_for(const std::vector<Device>& devices, int64_t examples);

// Logits of local device `device`'s model for the images X (run on that device's worker).
using DeviceForward = std::function<Tensor(int device, const Tensor& X)>;

// How many examples of `data` the model classifies right, evaluated in batches of
// `batch_size` without gradients, each batch sharded over the pool's devices of every
// process of `group`, the counts summed over all (by group.comm).
int64_t count_correct_split(DevicePool& pool, const ProcessGroup& group, const data::Dataset& data,
                            int64_t batch_size, const DeviceForward& forward);

// The confusion matrix of the model over `data`, evaluated exactly as count_correct_split
// does (the same shards, batches and devices): row-major [classes x classes], entry
// (true label, predicted class) the number of examples, summed over the whole job. The
// prediction is the first largest logit, as ops::count_correct takes it.
std::vector<int64_t> confusion_split(DevicePool& pool, const ProcessGroup& group,
                                     const data::Dataset& data, int64_t batch_size, const DeviceForward& forward,
                                     int64_t classes);

}  // namespace dpt::parallel
