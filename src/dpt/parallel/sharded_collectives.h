// The two halves of an allreduce, for callers that work on one slice of a buffer between
// them (ZeRO's sharded optimizer step, zero_optimizer.h; bf16 compression, compression.h):
// rank r's slice is ring::chunk(r, count, N), as in the ring. Both are built on alltoall,
// so every backend with host buffers has them; each rank receives (N-1)/N of the buffer in
// each, the ring allreduce's volume for the pair. The values travel as `compression` says.
#pragma once

#include <cstddef>

#include "dpt/parallel/communicator.h"
#include "dpt/parallel/ring_schedule.h"

namespace dpt::parallel {

// This rank's slice of `count` elements among the communicator's ranks.
inline ring::Range my_slice(const Communicator& comm, int rank, size_t count) {
  return ring::chunk(rank, count, comm.size());
}

// Reduce-scatter: on return data[my_slice) holds the sum over the ranks of their
// data[my_slice), added in float in rank order; the rest of `data` is left as it was.
// bf16 rounds each rank's values once before they travel (this rank's own too, so that
// the sum does not depend on which rank holds it).
void reduce_scatter_sum(Communicator& comm, int rank, float* data, size_t count, Compression compression);

// All-gather: on return data holds every rank's data[its slice) in that slice's place.
// bf16 rounds every slice once before it travels (this rank's own too, so that every rank
// holds the same bits).
void all_gather(Communicator& comm, int rank, float* data, size_t count, Compression compression);

}  // namespace dpt::parallel
