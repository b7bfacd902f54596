// Convolutions of a single-channel image into at most 32 channels (LeNet's conv1: 1 -> 20
// channels, 3 x 3), written channels-last.
//
// oneDNN 2.6 runs this shape at 13-17% of the FMA peak (bench/layer_roofline): with one
// input channel its kernels have 9 multiply-adds per output value to spread over 16-lane
// registers of 20 channels. Here each output pixel keeps its <= 32 channels in two
// registers: per tap, one broadcast of the input pixel and two FMAs with the tap's weights,
// which stay in registers for the whole image. Used where the activation layout is
// channels-last (AVX-512 machines) and the precision is fp32; elsewhere oneDNN runs.
#include <immintrin.h>

#include <cstring>

#include "dpt/ops/cpu/kernels.h"

namespace dpt::ops::cpu {

namespace {
constexpr int64_t kMaxChannels = 32;

// The weights of one tap for all channels, and the bias: lanes 0-15 and 16-31, zero past
// the last channel.
struct ChannelPair {
  __m512 low, high;
};

__attribute__((target("avx512f"))) ChannelPair load_channels(const float* values, int64_t stride, int64_t channels) {
  alignas(64) float lanes[kMaxChannels] = {};
  if (values)
    for (int64_t c = 0; c < channels; ++c) lanes[c] = values[c * stride];
  return {_mm512_load_ps(lanes), _mm512_load_ps(lanes + 16)};
}

// out[n, oh, ow, c] = bias[c] + sum over the KH x KW taps of x[n, oh + i, ow + j] * w[c, i, j],
// summed in tap order; with `relu`, 0 where that is not > 0.
template <int KH, int KW>
__attribute__((target("avx512f"))) void forward_kernel(const float* x, int64_t images, int64_t in_h, int64_t in_w,
                                                       const float* weight, const float* bias, int64_t channels,
                                                       bool relu, float* out) {
  constexpr int kTaps = KH * KW;
  ChannelPair w[kTaps];
  for (int t = 0; t < kTaps; ++t) w[t] = load_channels(weight + t, kTaps, channels);
  const ChannelPair b = load_channels(bias, 1, channels);
  const int64_t out_h = in_h - KH + 1, out_w = in_w - KW + 1;
  const __mmask16 high_lanes = channels > 16 ? static_cast<__mmask16>((1u << (channels - 16)) - 1) : 0;
  const __mmask16 low_lanes = channels >= 16 ? 0xffff : static_cast<__mmask16>((1u << channels) - 1);
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t n = 0; n < images; ++n) {
    const float* image = x + n * in_h * in_w;
    for (int64_t oh = 0; oh < out_h; ++oh) {
      for (int64_t ow = 0; ow < out_w; ++ow) {
        __m512 low = b.low, high = b.high;
        for (int i = 0; i < KH; ++i) {
          const float* row = image + (oh + i) * in_w + ow;
          for (int j = 0; j < KW; ++j) {
            const __m512 v = _mm512_set1_ps(row[j]);
            low = _mm512_fmadd_ps(v, w[i * KW + j].low, low);
            high = _mm512_fmadd_ps(v, w[i * KW + j].high, high);
          }
        }
        if (relu) {  // value > 0 ? value : 0, as oneDNN's ReLU
          low = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(low, zero, _CMP_GT_OQ), low);
          high = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(high, zero, _CMP_GT_OQ), high);
        }
        float* pixel = out + ((n * out_h + oh) * out_w + ow) * channels;
        _mm512_mask_storeu_ps(pixel, low_lanes, low);
        if (high_lanes) _mm512_mask_storeu_ps(pixel + 16, high_lanes, high);
      }
    }
  }
}
}  // namespace

bool single_channel_conv_fits(const Shape& x, const Shape& weight, ConvGeometry g) {
  const bool kernel_fits = (weight[2] == 3 && weight[3] == 3) || (weight[2] == 5 && weight[3] == 5);
  return x[1] == 1 && weight[0] <= kMaxChannels && kernel_fits && g.stride == 1 && g.padding == 0;
}

void single_channel_conv_forward(const float* x, const Shape& x_shape, const float* weight, const Shape& weight_shape,
                                 const float* bias, bool relu, float* out_channels_last) {
  const int64_t images = x_shape[0], in_h = x_shape[2], in_w = x_shape[3], channels = weight_shape[0];
  if (weight_shape[2] == 3)
    forward_kernel<3, 3>(x, images, in_h, in_w, weight, bias, channels, relu, out_channels_last);
  else
    forward_kernel<5, 5>(x, images, in_h, in_w, weight, bias, channels, relu, out_channels_last);
}

}  // namespace dpt::ops::cpu
