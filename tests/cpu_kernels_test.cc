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

// LeNet's conv1 (20 channels: blocks of 80 floats) and conv2 (50: blocks of 400) at the
// pixel counts of a 128-image shard; channel counts that fill 16-float vectors exactly, or
// need blocks of 2032 floats (127), or none fit the block limit (4099); pixel counts that
// leave a tail of whole pixels after the blocks, and inputs shorter than one block.
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
