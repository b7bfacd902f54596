// The CUDA backend's step-ledger kernels (ops/ledger.h). Nothing here waits for the GPU:
// the ledger is read by the host only when the training loop needs figures.
//   add_step_figures: the correct count with integer atomics (count_correct, loss.cu), then
//     one thread adds the loss to the double in kLossSum;
//   record_non_finite: per gradient a grid-stride scan counting non-finite values and
//     keeping the first one's index (integer atomics: the result does not depend on the
//     order the blocks run in), then one thread commits the first bad tensor to the ledger.
#include <algorithm>
#include <climits>
#include <cstdint>

#include "dpt/ops/cuda/grid.cuh"
#include "dpt/ops/cuda/launch.h"
#include "dpt/ops/ledger_slots.h"

namespace dpt::ops::cuda {

namespace {
__device__ int64_t bit_of(float v) {
  if (isnan(v)) return kNanBit;
  return v > 0 ? kPosInfBit : kNegInfBit;
}

__global__ void add_loss_kernel(int64_t* ledger, const float* loss) {
  const float l = loss[0];
  ledger[kLossSum] = __double_as_longlong(__longlong_as_double(ledger[kLossSum]) + static_cast<double>(l));
  if (!isfinite(l)) ledger[kLossNonFinite] |= bit_of(l);
}

// Per scanned tensor two slots: [0] the non-finite count, [1] ULLONG_MAX - (index * 4 + the
// first's bit code), so that zeroed slots mean "none" and atomicMax keeps the lowest index.
constexpr unsigned long long kNone = 0;

__device__ unsigned long long block_max(unsigned long long v) {
  __shared__ unsigned long long partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) {
    const unsigned long long other = __shfl_down_sync(0xffffffffu, v, offset);
    v = other > v ? other : v;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? partial[threadIdx.x] : kNone;
  if (warp == 0) {
    for (int offset = 16; offset > 0; offset /= 2) {
      const unsigned long long other = __shfl_down_sync(0xffffffffu, v, offset);
      v = other > v ? other : v;
    }
  }
  __syncthreads();
  return v;
}

__global__ void scan_kernel(const float* g, int64_t n, unsigned long long* slots) {
  unsigned long long count = 0, first = kNone;
  DPT_GRID_STRIDE_LOOP(i, n) {
    const float v = g[i];  // consecutive threads read consecutive values
    if (!isfinite(v)) {
      ++count;
      const unsigned long long key = ULLONG_MAX - (static_cast<unsigned long long>(i) * 4 + bit_of(v) / 2);
      first = key > first ? key : first;
    }
  }
  count = block_sum(count);
  first = block_max(first);
  if (threadIdx.x == 0 && count > 0) {
    atomicAdd(&slots[0], count);
    atomicMax(&slots[1], first);
  }
}

__global__ void commit_kernel(int64_t* ledger, const unsigned long long* slots, int64_t tensors, int64_t tag) {
  if (!begin_non_finite_record(ledger, tag)) return;
  for (int64_t t = 0; t < tensors; ++t) {
    if (slots[2 * t] == 0) continue;
    const unsigned long long key = ULLONG_MAX - slots[2 * t + 1];
    write_non_finite(ledger, tag, t, static_cast<int64_t>(slots[2 * t]), int64_t{1} << (key % 4));  // code -> bit
    return;
  }
}
}  // namespace

void add_step_loss(int64_t* ledger, const float* loss_sum, cudaStream_t s) {
  DPT_LAUNCH(add_loss_kernel, 1, 1, 0, s, ledger, loss_sum);
}

void scan_non_finite(const float* values, int64_t n, unsigned long long* slots, cudaStream_t s) {
  // A few blocks per SM are enough to stream a gradient; more only add atomics.
  const int blocks = std::min(blocks_for(n), 1024);
  DPT_LAUNCH(scan_kernel, blocks, kThreads, 0, s, values, n, slots);
}

void commit_non_finite(int64_t* ledger, const unsigned long long* slots, int64_t tensors, int64_t tag,
                       cudaStream_t s) {
  DPT_LAUNCH(commit_kernel, 1, 1, 0, s, ledger, slots, tensors, tag);
}

}  // namespace dpt::ops::cuda
