// Launch geometry shared by the .cu files: a grid-stride loop over n elements.
#pragma once

#include <algorithm>
#include <cstdint>

namespace dpt::ops::cuda {

constexpr int kThreads = 256;

// Enough blocks to cover n with kThreads each, capped: the kernels loop with a grid stride.
inline int blocks_for(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535));
}

#define DPT_GRID_STRIDE_LOOP(i, n)                                                       \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Sum of v over the threads of a block of kThreads threads; the result is valid in thread 0.
template <class T>
__device__ T block_sum(T v) {
  __shared__ T partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? partial[threadIdx.x] : T(0);
  if (warp == 0) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  __syncthreads();  // partial may be reused by the next call
  return v;
}

}  // namespace dpt::ops::cuda
