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

}  // namespace
}  // namespace dpt
