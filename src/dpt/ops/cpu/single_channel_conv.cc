// Convolutions of a single-channel image into at most 32 channels (LeNet's conv1: 1 -> 20
// channels, 3 x 3), written channels-last.
//
// oneDNN 2.6 runs this shape at 13-17% of the FMA peak (bench/layer_roofline): with one
// input channel its kernels have 9 multiply-adds per output value to spread over 16-lane
// registers of 20 channels. Here each output pixel keeps its <= 32 channels in two
// registers: per tap, one broadcast of the input pixel and two FMAs with the tap's weights,
// which stay in registers for the whole image. Followed by ReLU and average pooling (LeNet's
// first block), the forward pools in registers too and writes the pooled output alone, with
// a 32-bit ReLU mask per output pixel (a bit per channel) for the backward: 0.35 MB per
// 128-image shard where the convolution's output was 6.9 MB, written, read by the pooling
// and read again by the backward from beyond the caches. The backward of that first layer
// (its input needs no gradient) is one kernel of the same shape: weight and bias gradients
// straight from the pooled gradient. Used where the activation layout is channels-last
// (AVX-512 machines), in fp32 also under --precision bf16 (see ops/precision.h); elsewhere
// oneDNN runs.
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

// The lanes of the two registers that hold channels: 0-15 and 16-31, up to `channels`.
struct ChannelLanes {
  __mmask16 low, high;
};
inline ChannelLanes channel_lanes(int64_t channels) {
  return {channels >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << channels) - 1),
          channels > 16 ? static_cast<__mmask16>((1u << (channels - 16)) - 1) : static_cast<__mmask16>(0)};
}

// One output pixel's channels: bias + sum over the KH x KW taps of x[i, j] * w[c, i, j], in
// tap order; `row0` points at the window's top-left input pixel.
template <int KH, int KW>
__attribute__((target("avx512f"))) inline ChannelPair conv_pixel(const float* row0, int64_t in_w, const ChannelPair* w,
                                                                 const ChannelPair& b) {
  __m512 low = b.low, high = b.high;
#pragma GCC unroll 8
  for (int i = 0; i < KH; ++i) {
    const float* row = row0 + i * in_w;
#pragma GCC unroll 8
    for (int j = 0; j < KW; ++j) {
      const __m512 v = _mm512_set1_ps(row[j]);
      low = _mm512_fmadd_ps(v, w[i * KW + j].low, low);
      high = _mm512_fmadd_ps(v, w[i * KW + j].high, high);
    }
  }
  return {low, high};
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
  const auto [low_lanes, high_lanes] = channel_lanes(channels);
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t oh = 0; oh < out_h; ++oh) {
    for (int64_t ow = 0; ow < out_w; ++ow) {
      auto [low, high] = conv_pixel<KH, KW>(image + oh * in_w + ow, in_w, w, b);
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

// One image of relu(conv(x)) average-pooled by `pool` (window and step): each pooled pixel
// adds its window's pool x pool outputs in row-major order from 0 and divides by the
// window's area, as oneDNN's average pooling does, so the values equal pooling the
// convolution's output bit for bit. Outputs the pooling drops are not computed. With
// `masks`, writes each computed output's ReLU mask (bit c: channel c > 0).
template <int KH, int KW>
__attribute__((target("avx512f"))) void forward_pool_image(const float* image, int64_t in_w, const float* weight,
                                                           const float* bias, int64_t channels, int64_t pool,
                                                           int64_t pooled_h, int64_t pooled_w, float* out,
                                                           uint32_t* masks) {
  constexpr int kTaps = KH * KW;
  ChannelPair w[kTaps];
#pragma GCC unroll 32
  for (int t = 0; t < kTaps; ++t) w[t] = load_channels(weight + t, kTaps, channels);
  const ChannelPair b = load_channels(bias, 1, channels);
  const auto [low_lanes, high_lanes] = channel_lanes(channels);
  const __m512 zero = _mm512_setzero_ps();
  const __m512 area = _mm512_set1_ps(static_cast<float>(pool * pool));
  const int64_t kept_w = pooled_w * pool;
  for (int64_t ph = 0; ph < pooled_h; ++ph) {
    for (int64_t pw = 0; pw < pooled_w; ++pw) {
      __m512 sum_low = zero, sum_high = zero;
      for (int64_t i = 0; i < pool; ++i) {
        const int64_t oh = ph * pool + i;
        for (int64_t j = 0; j < pool; ++j) {
          const int64_t ow = pw * pool + j;
          const auto [low, high] = conv_pixel<KH, KW>(image + oh * in_w + ow, in_w, w, b);
          const __mmask16 positive_low = _mm512_cmp_ps_mask(low, zero, _CMP_GT_OQ);
          const __mmask16 positive_high = _mm512_cmp_ps_mask(high, zero, _CMP_GT_OQ);
          if (masks) masks[oh * kept_w + ow] = positive_low | (static_cast<uint32_t>(positive_high) << 16);
          sum_low = _mm512_add_ps(sum_low, _mm512_maskz_mov_ps(positive_low, low));
          sum_high = _mm512_add_ps(sum_high, _mm512_maskz_mov_ps(positive_high, high));
        }
      }
      float* pixel = out + (ph * pooled_w + pw) * channels;
      _mm512_mask_storeu_ps(pixel, low_lanes, _mm512_div_ps(sum_low, area));
      if (high_lanes) _mm512_mask_storeu_ps(pixel + 16, high_lanes, _mm512_div_ps(sum_high, area));
    }
  }
}

// One image's share of the weight and bias gradients of relu(conv(x)) average-pooled by
// `pool`, from the pooled gradient: per output pixel, g = (its ReLU mask) ? grad_pooled /
// pool^2 : 0 (as relu_avg_pool_backward gives), then bias += g and, per tap, weight += x * g,
// summed in registers. Writes kTaps + 1 rows of 32 floats into `partials` (the taps, then
// the bias); `spread` holds pooled_w * 32 floats of scratch.
template <int KH, int KW>
__attribute__((target("avx512f"))) void image_weight_grads(const float* image, int64_t in_w, const uint32_t* masks,
                                                           const float* grad_pooled, int64_t pooled_h, int64_t pooled_w,
                                                           int64_t pool, int64_t channels, float* spread,
                                                           float* partials) {
  constexpr int kTaps = KH * KW;
  const auto [low_lanes, high_lanes] = channel_lanes(channels);
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
    const uint32_t* mask_row = masks + oh * pooled_w * pool;
    for (int64_t ow = 0; ow < pooled_w * pool; ++ow) {
      const float* s = spread + (ow / pool) * kMaxChannels;
      const __m512 g_low = _mm512_maskz_loadu_ps(static_cast<__mmask16>(mask_row[ow]), s);
      const __m512 g_high = _mm512_maskz_loadu_ps(static_cast<__mmask16>(mask_row[ow] >> 16), s + 16);
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
void forward_pool_kernel(const float* x, int64_t images, int64_t in_h, int64_t in_w, const float* weight,
                         const float* bias, int64_t channels, int64_t pool, int64_t pooled_h, int64_t pooled_w,
                         float* out, uint32_t* masks) {
  const int64_t image_out = pooled_h * pooled_w * channels, image_masks = pooled_h * pool * pooled_w * pool;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < images; ++n) {
    forward_pool_image<KH, KW>(x + n * in_h * in_w, in_w, weight, bias, channels, pool, pooled_h, pooled_w,
                               out + n * image_out, masks ? masks + n * image_masks : nullptr);
  }
}

template <int KH, int KW>
void weight_grad_kernel(const float* x, int64_t images, int64_t in_h, int64_t in_w, const uint32_t* masks,
                        const float* grad_pooled, int64_t pooled_h, int64_t pooled_w, int64_t pool, int64_t channels,
                        float* grad_weight, float* grad_bias) {
  constexpr int kTaps = KH * KW;
  constexpr int64_t kRows = kTaps + 1;
  const int64_t image_masks = pooled_h * pool * pooled_w * pool;
  // From the caching allocator: a std::vector this size (164 KB for LeNet's shard) would be
  // mapped and page-faulted afresh on every call.
  const Tensor partial_sums = Tensor::empty({images * kRows * kMaxChannels});
  float* partials = partial_sums.data<float>();
#pragma omp parallel
  {
    std::vector<float> spread(static_cast<size_t>(pooled_w * kMaxChannels));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < images; ++n) {
      image_weight_grads<KH, KW>(x + n * in_h * in_w, in_w, masks + n * image_masks,
                                 grad_pooled + n * pooled_h * pooled_w * channels, pooled_h, pooled_w, pool, channels,
                                 spread.data(), partials + n * kRows * kMaxChannels);
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

void single_channel_conv_relu_avg_pool_forward(const float* x, const Shape& x_shape, const float* weight,
                                               const Shape& weight_shape, const float* bias, int pool,
                                               const Shape& pooled_shape, float* pooled_channels_last,
                                               uint32_t* relu_masks) {
  const int64_t images = x_shape[0], in_h = x_shape[2], in_w = x_shape[3], channels = weight_shape[0];
  const int64_t pooled_h = pooled_shape[2], pooled_w = pooled_shape[3];
  if (weight_shape[2] == 3)
    forward_pool_kernel<3, 3>(x, images, in_h, in_w, weight, bias, channels, pool, pooled_h, pooled_w,
                              pooled_channels_last, relu_masks);
  else
    forward_pool_kernel<5, 5>(x, images, in_h, in_w, weight, bias, channels, pool, pooled_h, pooled_w,
                              pooled_channels_last, relu_masks);
}

void single_channel_conv_relu_avg_pool_weight_grads(const float* x, const Shape& x_shape, const uint32_t* relu_masks,
                                                    const float* grad_pooled_channels_last, const Shape& pooled_shape,
                                                    int pool, float* grad_weight, const Shape& weight_shape,
                                                    float* grad_bias) {
  const int64_t images = x_shape[0], in_h = x_shape[2], in_w = x_shape[3], channels = weight_shape[0];
  const int64_t pooled_h = pooled_shape[2], pooled_w = pooled_shape[3];
  if (weight_shape[2] == 3)
    weight_grad_kernel<3, 3>(x, images, in_h, in_w, relu_masks, grad_pooled_channels_last, pooled_h, pooled_w, pool,
                             channels, grad_weight, grad_bias);
  else
    weight_grad_kernel<5, 5>(x, images, in_h, in_w, relu_masks, grad_pooled_channels_last, pooled_h, pooled_w, pool,
                             channels, grad_weight, grad_bias);
}

}  // namespace dpt::ops::cpu
