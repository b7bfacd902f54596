// Summing gradients across devices.
#pragma once

#include <vector>

#include "dpt/core/tensor.h"
#include "dpt/parallel/communicator.h"

namespace dpt::parallel {

// The lesson's allreduce, for one tensor per device held by one caller: afterwards every
// tensor holds the elementwise sum (summed onto the first, then copied back).
void allreduce(const std::vector<Tensor>& data);

// What each device's worker calls after its backward(): packs the gradients of `params`
// into one flat buffer (one collective per step instead of one per tensor), sums it over
// all ranks with `comm`, and unpacks the sums into the gradients. A parameter without a
// gradient contributes zeros, so every rank passes the same buffer size.
void allreduce_gradients(Communicator& comm, int rank, const std::vector<Tensor>& params,
                         std::vector<float>& flat_buffer);

}  // namespace dpt::parallel
