// The CPU backend's own loops, against exact references. The values are small integers,
// so every partial sum is exact in float and any summation order gives the same answer:
// a wrong channel, a dropped tail or a block counted twice shows as an exact mismatch.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/ops/cpu/kernels.h"

namespace dpt {
namespace {

std::vector<float> small_integers(int64_t count) {
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) values[static_cast<size_t>(i)] = static_cast<float>((i * 7919) % 13 - 6);
  return values;
}

struct ChannelsLastCase {
  int64_t pixels, channels;
};

class SumChannelsLast : public testing::TestWithParam<ChannelsLastCase> {};

TEST_P(SumChannelsLast, EqualsTheSumOfEveryPixelsChannel) {
  const auto [pixels, channels] = GetParam();
  const std::vector<float> data = small_integers(pixels * channels);
  std::vector<double> expected(static_cast<size_t>(channels), 0.0);
  for (int64_t p = 0; p < pixels; ++p)
    for (int64_t c = 0; c < channels; ++c)
      expected[static_cast<size_t>(c)] += data[static_cast<size_t>(p * channels + c)];

  std::vector<float> sums(static_cast<size_t>(channels), -1.0f);
  ops::cpu::sum_channels_last(data.data(), pixels, channels, sums.data());
  for (int64_t c = 0; c < channels; ++c)
    EXPECT_EQ(sums[static_cast<size_t>(c)], static_cast<float>(expected[static_cast<size_t>(c)])) << "channel " << c;
}

// A gradient in a channel block (nChw8c, nChw16c: [images, blocks, pixels, block], the
// last block padded) sums to the same bits as the same values channels-last, so the bias
// gradient does not depend on the layout it arrived in.
TEST(SumChannelsBlocked, EqualsTheChannelsLastSumsBitForBit) {
  const int64_t images = 3, pixels = 29;
  for (const int64_t block : {8, 16}) {
    for (const int64_t channels : {5, 8, 20, 64}) {
      const int64_t blocks = (channels + block - 1) / block;
      std::vector<float> channels_last(static_cast<size_t>(images * pixels * channels));
      std::vector<float> blocked(static_cast<size_t>(images * blocks * pixels * block), 0.0f);
      for (size_t i = 0; i < channels_last.size(); ++i) channels_last[i] = 0.37f * static_cast<float>(i % 97) - 11.3f;
      for (int64_t n = 0; n < images; ++n)
        for (int64_t p = 0; p < pixels; ++p)
          for (int64_t c = 0; c < channels; ++c)
            blocked[static_cast<size_t>(((n * blocks + c / block) * pixels + p) * block + c % block)] =
                channels_last[static_cast<size_t>((n * pixels + p) * channels + c)];
      std::vector<float> a(static_cast<size_t>(channels)), b(static_cast<size_t>(channels));
      ops::cpu::sum_channels_last(channels_last.data(), images * pixels, channels, a.data());
      ops::cpu::sum_channels_blocked(blocked.data(), images, pixels, channels, block, b.data());
      EXPECT_EQ(a, b) << "block " << block << ", " << channels << " channels";
    }
  }
}

// Pixels of zeros change no bit of the sums, wherever they sit: conv2d_relu_avg_pool2d
// relies on it when it skips the outputs its pooling drops (their gradients are 0). The
// values here are not integers, so a sum that grouped them differently once zeros moved
// them (as blocks of lcm(C, 16) floats did) would round differently.
TEST(SumChannelsLast, ZeroPixelsChangeNoBit) {
  const int64_t channels = 50, kept = 8, full = 9, images = 3;  // LeNet's conv2: 9 x 9, of which 8 x 8 are pooled
  std::vector<float> cropped, padded;
  uint64_t state = 12345;
  for (int64_t n = 0; n < images; ++n) {
    for (int64_t h = 0; h < full; ++h) {
      for (int64_t w = 0; w < full; ++w) {
        const bool kept_pixel = h < kept && w < kept;
        for (int64_t c = 0; c < channels; ++c) {
          state = state * 6364136223846793005ull + 1442695040888963407ull;
          const float value = static_cast<float>(static_cast<int64_t>(state >> 40) - (1 << 23)) / 3.0e5f;
          padded.push_back(kept_pixel ? value : 0.0f);
          if (kept_pixel) cropped.push_back(value);
        }
      }
    }
  }
  std::vector<float> from_cropped(channels), from_padded(channels);
  ops::cpu::sum_channels_last(cropped.data(), images * kept * kept, channels, from_cropped.data());
  ops::cpu::sum_channels_last(padded.data(), images * full * full, channels, from_padded.data());
  EXPECT_EQ(from_cropped, from_padded);
}

// LeNet's conv1 (20 channels) and conv2 (50) at the pixel counts of a 128-image shard;
// channel counts that fill 8-double vectors exactly or leave a remainder, many channels
// (4099), one channel, one pixel and none.
INSTANTIATE_TEST_SUITE_P(Shapes, SumChannelsLast,
                         testing::Values(ChannelsLastCase{128 * 26 * 26, 20}, ChannelsLastCase{128 * 9 * 9, 50},
                                         ChannelsLastCase{1000, 16}, ChannelsLastCase{333, 64},
                                         ChannelsLastCase{517, 127}, ChannelsLastCase{3, 4099}, ChannelsLastCase{7, 3},
                                         ChannelsLastCase{1, 20}, ChannelsLastCase{0, 5}, ChannelsLastCase{4097, 1}),
                         [](const testing::TestParamInfo<ChannelsLastCase>& info) {
                           return std::to_string(info.param.pixels) + "x" + std::to_string(info.param.channels);
                         });

struct BackwardDataCase {
  int64_t images, in_c, out_c, kh, kw, in_h, in_w;
};

class ScatterBackwardData : public testing::TestWithParam<BackwardDataCase> {};

// dx[n, ih, iw, c] = sum over (kh, kw, oc) of dy[n, ih - kh, iw - kw, oc] * w[oc, c, kh, kw],
// channels-last, summed in double by the definition.
TEST_P(ScatterBackwardData, EqualsTheDefinition) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "the kernel needs AVX-512";
  const auto [images, in_c, out_c, kh, kw, in_h, in_w] = GetParam();
  const int64_t out_h = in_h - kh + 1, out_w = in_w - kw + 1;
  const Shape x_shape{images, in_c, in_h, in_w}, w_shape{out_c, in_c, kh, kw}, dy_shape{images, out_c, out_h, out_w};
  ASSERT_TRUE(ops::cpu::scatter_backward_data_fits(x_shape, w_shape, {}));
  const std::vector<float> dy = small_integers(images * out_h * out_w * out_c);
  std::vector<float> w = small_integers(out_c * in_c * kh * kw);
  for (float& v : w) v = v / 2 + 1;  // not the same sequence as dy
  std::vector<double> expected(static_cast<size_t>(images * in_h * in_w * in_c), 0.0);
  for (int64_t n = 0; n < images; ++n)
    for (int64_t oh = 0; oh < out_h; ++oh)
      for (int64_t ow = 0; ow < out_w; ++ow)
        for (int64_t o = 0; o < out_c; ++o)
          for (int64_t i = 0; i < kh; ++i)
            for (int64_t j = 0; j < kw; ++j)
              for (int64_t c = 0; c < in_c; ++c)
                expected[static_cast<size_t>(((n * in_h + oh + i) * in_w + ow + j) * in_c + c)] +=
                    static_cast<double>(dy[static_cast<size_t>(((n * out_h + oh) * out_w + ow) * out_c + o)]) *
                    w[static_cast<size_t>(((o * in_c + c) * kh + i) * kw + j)];

  // One float past the end, which the kernel must leave alone.
  std::vector<float> dx(expected.size() + 1, -7.0f);
  ops::cpu::scatter_backward_data(dy.data(), dy_shape, w.data(), w_shape, x_shape, dx.data());
  for (size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(dx[i], static_cast<float>(expected[i])) << "element " << i;
  EXPECT_EQ(dx.back(), -7.0f);
}

// LeNet's conv2 after the crop (12 x 12 -> 8 x 8: kernel rows of 100 floats, 7 vectors)
// and without it (13 x 13); kernel rows of 1 to 7 vectors, full and partial; output rows
// that leave 1 or 2 pixels after the groups of 3 or 4.
INSTANTIATE_TEST_SUITE_P(Shapes, ScatterBackwardData,
                         testing::Values(BackwardDataCase{3, 20, 50, 5, 5, 12, 12},
                                         BackwardDataCase{2, 20, 50, 5, 5, 13, 13},
                                         BackwardDataCase{2, 22, 5, 5, 5, 9, 10}, BackwardDataCase{2, 3, 4, 3, 3, 7, 9},
                                         BackwardDataCase{2, 16, 8, 3, 3, 6, 6}, BackwardDataCase{1, 7, 3, 2, 4, 5, 8},
                                         BackwardDataCase{2, 1, 2, 1, 1, 3, 3},
                                         BackwardDataCase{1, 12, 6, 5, 6, 7, 11}),
                         [](const testing::TestParamInfo<BackwardDataCase>& info) {
                           const BackwardDataCase& c = info.param;
                           return std::to_string(c.in_c) + "to" + std::to_string(c.out_c) + "_k" +
                                  std::to_string(c.kh) + "x" + std::to_string(c.kw) + "_" + std::to_string(c.in_h) +
                                  "x" + std::to_string(c.in_w);
                         });

}  // namespace
}  // namespace dpt
