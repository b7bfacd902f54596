// Adaptive average pooling's bins, shared by the CPU and CUDA kernels: output index i of
// `out` over an axis of `in` averages [floor(i in / out), ceil((i + 1) in / out)), as
// torch.nn.AdaptiveAvgPool2d does (bins overlap when `out` does not divide `in`).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DPT_HOST_DEVICE __host__ __device__
#else
#define DPT_HOST_DEVICE
#endif

namespace dpt::ops {

struct AdaptiveBin {
  int64_t begin, end;
  DPT_HOST_DEVICE int64_t size() const { return end - begin; }
};

DPT_HOST_DEVICE inline AdaptiveBin adaptive_bin(int64_t i, int64_t in, int64_t out) {
  return {(i * in) / out, ((i + 1) * in + out - 1) / out};
}

}  // namespace dpt::ops
