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
#include <vector>

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
#pragma GCC unroll 32
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
#pragma GCC unroll 8
        for (int i = 0; i < KH; ++i) {
          const float* row = image + (oh + i) * in_w + ow;
#pragma GCC unroll 8
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

// totals[c] += the float in lane c.
__attribute__((target("avx512f"))) void flush(const ChannelPair& acc, double* totals) {
  alignas(64) float lanes[kMaxChannels];
  _mm512_store_ps(lanes, acc.low);
  _mm512_store_ps(lanes + 16, acc.high);
  for (int64_t c = 0; c < kMaxChannels; ++c) totals[c] += lanes[c];
}

// The weight and bias gradients of relu(conv(x)) average-pooled by `pool`, from the pooled
// gradient: per output pixel, g = relu_out > 0 ? grad_pooled / pool^2 : 0 (as
// relu_avg_pool_backward gives), then bias += g and, per tap, weight += x * g, in float
// registers over one image, in double across images.
template <int KH, int KW>
__attribute__((target("avx512f"))) void weight_grad_kernel(const float* x, int64_t images, int64_t in_h, int64_t in_w,
                                                           const float* relu_out, const float* grad_pooled,
                                                           int64_t pooled_h, int64_t pooled_w, int64_t pool,
                                                           int64_t channels, float* grad_weight, float* grad_bias) {
  constexpr int kTaps = KH * KW;
  const int64_t out_h = in_h - KH + 1, out_w = in_w - KW + 1;
  const __mmask16 high_lanes = channels > 16 ? static_cast<__mmask16>((1u << (channels - 16)) - 1) : 0;
  const __mmask16 low_lanes = channels >= 16 ? 0xffff : static_cast<__mmask16>((1u << channels) - 1);
  const __m512 zero = _mm512_setzero_ps();
  const __m512 area = _mm512_set1_ps(static_cast<float>(pool * pool));
  double weight_totals[kTaps][kMaxChannels] = {};
  double bias_totals[kMaxChannels] = {};
  // One pooled row divided by the area, 32 lanes per pooled pixel (floats: std::vector does
  // not align its elements to 64 bytes).
  std::vector<float> spread(static_cast<size_t>(pooled_w * kMaxChannels));
  for (int64_t n = 0; n < images; ++n) {
    const float* image = x + n * in_h * in_w;
    ChannelPair weight_acc[kTaps];
#pragma GCC unroll 32
    for (ChannelPair& acc : weight_acc) acc = {zero, zero};
    ChannelPair bias_acc{zero, zero};
    // Rows and columns past pooled_h * pool and pooled_w * pool were dropped by the
    // pooling: their gradient is 0 and they add nothing.
    for (int64_t oh = 0; oh < pooled_h * pool; ++oh) {
      if (oh % pool == 0) {
        const float* pooled_row = grad_pooled + (n * pooled_h + oh / pool) * pooled_w * channels;
        for (int64_t pw = 0; pw < pooled_w; ++pw) {
          const float* p = pooled_row + pw * channels;
          float* s = spread.data() + pw * kMaxChannels;
          _mm512_storeu_ps(s, _mm512_div_ps(_mm512_maskz_loadu_ps(low_lanes, p), area));
          _mm512_storeu_ps(s + 16, _mm512_div_ps(_mm512_maskz_loadu_ps(high_lanes, p + 16), area));
        }
      }
      const float* y_row = relu_out + (n * out_h + oh) * out_w * channels;
      for (int64_t ow = 0; ow < pooled_w * pool; ++ow) {
        const float* y = y_row + ow * channels;
        const float* s = spread.data() + (ow / pool) * kMaxChannels;
        const __m512 g_low =
            _mm512_maskz_loadu_ps(_mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(low_lanes, y), zero, _CMP_GT_OQ), s);
        const __m512 g_high = _mm512_maskz_loadu_ps(
            _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(high_lanes, y + 16), zero, _CMP_GT_OQ), s + 16);
        bias_acc.low = _mm512_add_ps(bias_acc.low, g_low);
        bias_acc.high = _mm512_add_ps(bias_acc.high, g_high);
#pragma GCC unroll 8
        for (int i = 0; i < KH; ++i) {
          const float* row = image + (oh + i) * in_w + ow;
#pragma GCC unroll 8
          for (int j = 0; j < KW; ++j) {
            const __m512 v = _mm512_set1_ps(row[j]);
            weight_acc[i * KW + j].low = _mm512_fmadd_ps(v, g_low, weight_acc[i * KW + j].low);
            weight_acc[i * KW + j].high = _mm512_fmadd_ps(v, g_high, weight_acc[i * KW + j].high);
          }
        }
      }
    }
#pragma GCC unroll 32
    for (int t = 0; t < kTaps; ++t) flush(weight_acc[t], weight_totals[t]);
    flush(bias_acc, bias_totals);
  }
  for (int64_t c = 0; c < channels; ++c) {
    for (int t = 0; t < kTaps; ++t) grad_weight[c * kTaps + t] = static_cast<float>(weight_totals[t][c]);
    if (grad_bias) grad_bias[c] = static_cast<float>(bias_totals[c]);
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

void single_channel_conv_relu_avg_pool_weight_grads(const float* x, const Shape& x_shape,
                                                    const float* relu_out_channels_last,
                                                    const float* grad_pooled_channels_last, const Shape& pooled_shape,
                                                    int pool, float* grad_weight, const Shape& weight_shape,
                                                    float* grad_bias) {
  const int64_t images = x_shape[0], in_h = x_shape[2], in_w = x_shape[3], channels = weight_shape[0];
  const int64_t pooled_h = pooled_shape[2], pooled_w = pooled_shape[3];
  if (weight_shape[2] == 3)
    weight_grad_kernel<3, 3>(x, images, in_h, in_w, relu_out_channels_last, grad_pooled_channels_last, pooled_h,
                             pooled_w, pool, channels, grad_weight, grad_bias);
  else
    weight_grad_kernel<5, 5>(x, images, in_h, in_w, relu_out_channels_last, grad_pooled_channels_last, pooled_h,
                             pooled_w, pool, channels, grad_weight, grad_bias);
}

}  // namespace dpt::ops::cpu
