// The ring allreduce's schedule, shared by every ring backend (in-process threads, MPI
// processes), and the elementwise reduction every backend applies. One definition, so
// that the ring of N threads and the ring of N processes add the same numbers in the same
// order and promise the same bits.
//
// The buffer of `count` elements is cut into n chunks. Rank r's left neighbour is r - 1
// and its right neighbour r + 1 (mod n). Reduce-scatter takes n - 1 steps: in step s rank
// r sends chunk (r - s) to the right and reduces chunk (r - 1 - s) from the left into its
// own; afterwards rank r holds the full reduction of chunk r + 1. All-gather then takes
// n - 1 steps: in step s rank r sends its finished chunk (r + 1 - s) to the right and
// copies chunk (r - s) from the left.
#pragma once

#include <cstddef>

#include "dpt/core/dtype.h"
#include "dpt/parallel/communicator.h"

namespace dpt::parallel::ring {

// Elements [begin, end) of a chunk.
struct Range {
  size_t begin = 0, end = 0;
  size_t size() const { return end - begin; }
};

// Chunk c of `count` elements cut into n near-equal parts, the first count % n one larger
// (chunk 0 is always a largest one; with count < n the last chunks are empty).
Range chunk(int c, size_t count, int n);

// What rank `rank` of n sends to its right neighbour and receives from its left one in
// step `step` (0 .. n-2) of a phase.
struct Step {
  Range send, receive;
};
Step reduce_scatter_step(int rank, int step, int n, size_t count);
Step all_gather_step(int rank, int step, int n, size_t count);

}  // namespace dpt::parallel::ring

namespace dpt::parallel {

// dst[i] = op(dst[i], src[i]) for i < count, elements of `type`. f32 sum is dst[i] +=
// src[i] (the order of the terms is the caller's: the ring's schedule fixes it); i64 sum
// wraps around on overflow; max and min keep dst[i] unless src[i] compares greater (less),
// so a NaN in dst stays and one in src is dropped, the same way on every backend.
void reduce_into(void* dst, const void* src, size_t count, DType type, ReduceOp op);

}  // namespace dpt::parallel
