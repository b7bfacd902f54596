// Per-channel sums of an activation gradient: a convolution's bias gradient.
//
// oneDNN 2.6's nhwc backward-weights kernels add the bias gradient in a C++ loop of
// 4-float SSE adds, one pixel at a time; in a LeNet training epoch that loop took 3.7% of
// all samples (perf, `--devices cpu:2`), more than conv1's forward. Here the sum runs over
// the flat array in blocks of lcm(C, 16) floats, so every 16-float vector lands on the same
// channels each time and no lane is wasted, with float partial sums flushed into double.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "dpt/core/cpu_features.h"
#include "dpt/ops/cpu/kernels.h"

namespace dpt::ops::cpu {

namespace {
using Vec16 = float __attribute__((vector_size(64)));

// Adds `blocks` consecutive blocks of `lanes` floats (a multiple of 16) into acc.
DPT_INLINE_BODY void add_blocks_body(const float* in, int64_t blocks, int64_t lanes, float* acc) {
  const int64_t vectors = lanes / 16;
  for (int64_t b = 0; b < blocks; ++b, in += lanes) {
    for (int64_t v = 0; v < vectors; ++v) {
      Vec16 a, x;
      std::memcpy(&a, acc + 16 * v, sizeof a);
      std::memcpy(&x, in + 16 * v, sizeof x);
      a += x;
      std::memcpy(acc + 16 * v, &a, sizeof a);
    }
  }
}
DPT_AVX512_VARIANT void add_blocks_avx512(const float* in, int64_t blocks, int64_t lanes, float* acc) {
  add_blocks_body(in, blocks, lanes, acc);
}
void add_blocks_portable(const float* in, int64_t blocks, int64_t lanes, float* acc) {
  add_blocks_body(in, blocks, lanes, acc);
}
void add_blocks(const float* in, int64_t blocks, int64_t lanes, float* acc) {
  cpu_has_avx512f() ? add_blocks_avx512(in, blocks, lanes, acc) : add_blocks_portable(in, blocks, lanes, acc);
}

// Blocks between flushes of the float partial sums into the double totals: each partial
// sum then adds at most this many values, which keeps its rounding error near float's.
constexpr int64_t kBlocksPerFlush = 64;
}  // namespace

void sum_channels_last(const float* data, int64_t pixels, int64_t channels, float* sums) {
  std::vector<double> totals(static_cast<size_t>(channels), 0.0);
  const int64_t n = pixels * channels;
  const int64_t lanes = std::lcm(channels, int64_t{16});
  int64_t i = 0;
  if (lanes <= 4096) {
    std::vector<float> acc(static_cast<size_t>(lanes));
    while (n - i >= lanes) {
      const int64_t blocks = std::min(kBlocksPerFlush, (n - i) / lanes);
      std::fill(acc.begin(), acc.end(), 0.0f);
      add_blocks(data + i, blocks, lanes, acc.data());
      for (int64_t k = 0; k < lanes; ++k) totals[static_cast<size_t>(k % channels)] += acc[static_cast<size_t>(k)];
      i += blocks * lanes;
    }
  }
  // i is a multiple of `channels` here: what is left are whole pixels.
  for (; i < n; ++i) totals[static_cast<size_t>(i % channels)] += data[i];
  for (int64_t c = 0; c < channels; ++c) sums[c] = static_cast<float>(totals[static_cast<size_t>(c)]);
}

}  // namespace dpt::ops::cpu
