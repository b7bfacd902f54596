// Convolutions of a single-channel image into at most 32 channels (LeNet's conv1: 1 -> 20
// channels, 3 x 3), written channels-last.
//
// oneDNN 2.6 runs this shape at 13-17% of the FMA peak (bench/layer_roofline): with one
// input channel its kernels have 9 multiply-adds per output value to spread over 16-lane
// registers of 20 channels. Here each output pixel keeps its <= 32 channels in two
// registers: per tap, one broadcast of the input pixel and two FMAs with the tap's weights,
// which stay in registers for the whole image. The backward of such a first layer (its
// input needs no gradient) followed by ReLU and average pooling is one kernel of the same
// shape: weight and bias gradients straight from the pooled gradient. Used where the
// activation layout is channels-last (AVX-512 machines), in fp32 also under --precision
// bf16 (see ops/precision.h); elsewhere oneDNN runs.
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

// One image: out[oh, ow, c] = bias[c] + sum over the KH x KW taps of x[oh + i, ow + j] *
// w[c, i, j], summed in tap order; with `relu`, 0 where that is not > 0.
template <int KH, int KW>
__attribute__((target("avx512f"))) void forward_image(const float* image, int64_t in_h, int64_t in_w,
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
      float* pixel = out + (oh * out_w + ow) * channels;
      _mm512_mask_storeu_ps(pixel, low_lanes, low);
      if (high_lanes) _mm512_mask_storeu_ps(pixel + 16, high_lanes, high);
    }
  }
}

// One image's share of the weight and bias gradients of relu(conv(x)) average-pooled by
// `pool`, from the pooled gradient: per output pixel, g = relu_out > 0 ? grad_pooled /
// pool^2 : 0 (as relu_avg_pool_backward gives), then bias += g and, per tap, weight += x * g,
// summed in registers. Writes kTaps + 1 rows of 32 floats into `partials` (the taps, then
// the bias); `spread` holds pooled_w * 32 floats of scratch.
template <int KH, int KW>
__attribute__((target("avx512f"))) void image_weight_grads(const float* image, int64_t in_w, const float* relu_out,
                                                           const float* grad_pooled, int64_t out_w, int64_t pooled_h,
                                                           int64_t pooled_w, int64_t pool, int64_t channels,
                                                           float* spread, float* partials) {
  constexpr int kTaps = KH * KW;
  const __mmask16 high_lanes = channels > 16 ? static_cast<__mmask16>((1u << (channels - 16)) - 1) : 0;
  const __mmask16 low_lanes = channels >= 16 ? 0xffff : static_cast<__mmask16>((1u << channels) - 1);
  const __m512 zero = _mm512_setzero_ps();
  const __m512 area = _mm512_set1_ps(static_cast<float>(pool * pool));
  ChannelPair weight_acc[kTaps];
#pragma GCC unroll 32
  for (ChannelPair& acc : weight_acc) acc = {zero, zero};
  ChannelPair bias_acc{zero, zero};
  // Rows and columns past pooled_h * pool and pooled_w * pool were dropped by the pooling:
  // their gradient is 0 and they add nothing.
  for (int64_t oh = 0; oh < pooled_h * pool; ++oh) {
    if (oh % pool == 0) {  // the pooled row divided by the area, 32 lanes per pooled pixel
      const float* pooled_row = grad_pooled + (oh / pool) * pooled_w * channels;
      for (int64_t pw = 0; pw < pooled_w; ++pw) {
        const float* p = pooled_row + pw * channels;
        _mm512_storeu_ps(spread + pw * kMaxChannels, _mm512_div_ps(_mm512_maskz_loadu_ps(low_lanes, p), area));
        _mm512_storeu_ps(spread + pw * kMaxChannels + 16,
                         _mm512_div_ps(_mm512_maskz_loadu_ps(high_lanes, p + 16), area));
      }
    }
    const float* y_row = relu_out + oh * out_w * channels;
    for (int64_t ow = 0; ow < pooled_w * pool; ++ow) {
      const float* y = y_row + ow * channels;
      const float* s = spread + (ow / pool) * kMaxChannels;
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
  for (int t = 0; t < kTaps; ++t) {
    _mm512_storeu_ps(partials + t * kMaxChannels, weight_acc[t].low);
    _mm512_storeu_ps(partials + t * kMaxChannels + 16, weight_acc[t].high);
  }
  _mm512_storeu_ps(partials + kTaps * kMaxChannels, bias_acc.low);
  _mm512_storeu_ps(partials + kTaps * kMaxChannels + 16, bias_acc.high);
}

// The drivers split the images over the calling device's OpenMP threads (as its oneDNN
// primitives do). The weight gradients add the images' float partial sums in image order
// in double, so they do not depend on how many threads there are.
template <int KH, int KW>
void forward_kernel(const float* x, int64_t images, int64_t in_h, int64_t in_w, const float* weight, const float* bias,
                    int64_t channels, bool relu, float* out) {
  const int64_t image_out = (in_h - KH + 1) * (in_w - KW + 1) * channels;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < images; ++n)
    forward_image<KH, KW>(x + n * in_h * in_w, in_h, in_w, weight, bias, channels, relu, out + n * image_out);
}

template <int KH, int KW>
void weight_grad_kernel(const float* x, int64_t images, int64_t in_h, int64_t in_w, const float* relu_out,
                        const float* grad_pooled, int64_t pooled_h, int64_t pooled_w, int64_t pool, int64_t channels,
                        float* grad_weight, float* grad_bias) {
  constexpr int kTaps = KH * KW;
  constexpr int64_t kRows = kTaps + 1;
  const int64_t out_h = in_h - KH + 1, out_w = in_w - KW + 1;
  // From the caching allocator: a std::vector this size (164 KB for LeNet's shard) would be
  // mapped and page-faulted afresh on every call.
  const Tensor partial_sums = Tensor::empty({images * kRows * kMaxChannels});
  float* partials = partial_sums.data<float>();
#pragma omp parallel
  {
    std::vector<float> spread(static_cast<size_t>(pooled_w * kMaxChannels));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < images; ++n) {
      image_weight_grads<KH, KW>(x + n * in_h * in_w, in_w, relu_out + n * out_h * out_w * channels,
                                 grad_pooled + n * pooled_h * pooled_w * channels, out_w, pooled_h, pooled_w, pool,
                                 channels, spread.data(), partials + n * kRows * kMaxChannels);
    }
  }
  double totals[kRows][kMaxChannels] = {};
  for (int64_t n = 0; n < images; ++n)
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t c = 0; c < channels; ++c)
        totals[r][c] += partials[static_cast<size_t>((n * kRows + r) * kMaxChannels + c)];
  for (int64_t c = 0; c < channels; ++c) {
    for (int t = 0; t < kTaps; ++t) grad_weight[c * kTaps + t] = static_cast<float>(totals[t][c]);
    if (grad_bias) grad_bias[c] = static_cast<float>(totals[kTaps][c]);
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
