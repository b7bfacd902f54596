// Per-channel sums of an activation gradient: a convolution's bias gradient.
//
// oneDNN 2.6's nhwc backward-weights kernels add the bias gradient in a C++ loop of
// 4-float SSE adds, one pixel at a time; in a LeNet training epoch that loop took 3.7% of
// all samples (perf, `--devices cpu:2`), more than conv1's forward. Here each channel adds
// its pixels in order into a double, the channels side by side in vectors of 8 doubles.
// In order, so that pixels of zeros change no bit of the sums wherever they sit: a
// convolution that skips the outputs a pooling drops (whose gradients are 0) gets the same
// bias gradient as one that computes them (see conv2d_relu_avg_pool2d). In double, so that
// the 10^4-10^5 pixels of a batch add with less rounding than float pairwise sums would.
#include <vector>

#include "dpt/core/cpu_features.h"
#include "dpt/ops/cpu/kernels.h"

namespace dpt::ops::cpu {

namespace {
DPT_INLINE_BODY void add_pixels_body(const float* data, int64_t pixels, int64_t channels, double* totals) {
  for (int64_t p = 0; p < pixels; ++p, data += channels) {
    for (int64_t c = 0; c < channels; ++c) totals[c] += static_cast<double>(data[c]);
  }
}
DPT_AVX512_VARIANT void add_pixels_avx512(const float* data, int64_t pixels, int64_t channels, double* totals) {
  add_pixels_body(data, pixels, channels, totals);
}
void add_pixels_portable(const float* data, int64_t pixels, int64_t channels, double* totals) {
  add_pixels_body(data, pixels, channels, totals);
}
}  // namespace

void sum_channels_last(const float* data, int64_t pixels, int64_t channels, float* sums) {
  std::vector<double> totals(static_cast<size_t>(channels), 0.0);
  cpu_has_avx512f() ? add_pixels_avx512(data, pixels, channels, totals.data())
                    : add_pixels_portable(data, pixels, channels, totals.data());
  for (int64_t c = 0; c < channels; ++c) sums[c] = static_cast<float>(totals[static_cast<size_t>(c)]);
}

void sum_channels_blocked(const float* data, int64_t images, int64_t pixels, int64_t channels, int64_t block,
                          float* sums) {
  const int64_t blocks = (channels + block - 1) / block;
  std::vector<double> totals(static_cast<size_t>(blocks * block), 0.0);
  // Image by image, block by block: each channel still adds its pixels in the order
  // (image, row, column) that sum_channels_last adds them in, so the sums are the same bits.
  for (int64_t n = 0; n < images; ++n) {
    for (int64_t b = 0; b < blocks; ++b, data += pixels * block) {
      double* t = totals.data() + b * block;
      cpu_has_avx512f() ? add_pixels_avx512(data, pixels, block, t) : add_pixels_portable(data, pixels, block, t);
    }
  }
  for (int64_t c = 0; c < channels; ++c) sums[c] = static_cast<float>(totals[static_cast<size_t>(c)]);
}

}  // namespace dpt::ops::cpu
