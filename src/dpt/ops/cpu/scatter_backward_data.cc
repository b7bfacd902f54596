// The backward-data pass of a convolution whose input has few channels (LeNet's conv2:
// 20 -> 50 channels, 5 x 5), channels-last.
//
// oneDNN 2.6 computes the 20 input channels in 16-lane blocks (16 + 4 of 32 lanes used)
// and runs at 42-46% of the FMA peak here (bench/layer_roofline). Channels-last, the KW x
// IC input values one kernel row reads are contiguous (5 x 20 = 100 floats: 7 vectors, 89%
// of their lanes used), so each output pixel scatters its gradient row by row: for kernel
// row kh, dx[oh + kh, ow .. ow + KW) += sum over oc of dy[oh, ow, oc] * w[oc, :, kh, :],
// a 1 x OC by OC x (KW x IC) product held in registers for 4 output pixels at a time.
#include <immintrin.h>

#include <cstring>

#include "dpt/ops/cpu/kernels.h"

namespace dpt::ops::cpu {

namespace {
constexpr int64_t kMaxVectors = 7;  // 112 floats of kernel row: 4 pixels x 7 vectors of sums in registers

// The weights by kernel row: packed[kh][oc][kw * IC + ic] = w[oc, ic, kh, kw], each row
// padded with zeros to V x 16 floats.
void pack_weights(const float* weight, int64_t out_c, int64_t in_c, int64_t kh_count, int64_t kw_count, int64_t vectors,
                  float* packed) {
  const int64_t row = vectors * 16;
  std::memset(packed, 0, static_cast<size_t>(kh_count * out_c * row) * sizeof(float));
  for (int64_t kh = 0; kh < kh_count; ++kh)
    for (int64_t o = 0; o < out_c; ++o)
      for (int64_t kw = 0; kw < kw_count; ++kw)
        for (int64_t c = 0; c < in_c; ++c)
          packed[(kh * out_c + o) * row + kw * in_c + c] = weight[((o * in_c + c) * kh_count + kh) * kw_count + kw];
}

// J neighbouring output pixels of one row: their gradients dy (J x OC, channels-last)
// times one packed kernel row, added to dx from the first pixel's position (the J
// destinations overlap, and are added in pixel order).
template <int V, int J>
__attribute__((target("avx512f"))) inline void scatter_pixels(const float* dy, int64_t out_c, const float* packed_row,
                                                              float* dx, int64_t in_c, __mmask16 tail) {
  __m512 acc[J][V];
#pragma GCC unroll 8
  for (int j = 0; j < J; ++j)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[j][v] = _mm512_setzero_ps();
  for (int64_t o = 0; o < out_c; ++o) {
    const float* w = packed_row + o * V * 16;
    __m512 g[J];
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) g[j] = _mm512_set1_ps(dy[j * out_c + o]);
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      const __m512 wv = _mm512_loadu_ps(w + 16 * v);
#pragma GCC unroll 8
      for (int j = 0; j < J; ++j) acc[j][v] = _mm512_fmadd_ps(g[j], wv, acc[j][v]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < J; ++j) {
    float* d = dx + j * in_c;
#pragma GCC unroll 8
    for (int v = 0; v + 1 < V; ++v) _mm512_storeu_ps(d + 16 * v, _mm512_add_ps(_mm512_loadu_ps(d + 16 * v), acc[j][v]));
    float* last = d + 16 * (V - 1);
    _mm512_mask_storeu_ps(last, tail, _mm512_add_ps(_mm512_maskz_loadu_ps(tail, last), acc[j][V - 1]));
  }
}

struct Dims {
  int64_t in_h, in_w, in_c, out_h, out_w, out_c, kh, kw;
};

// One image: dx (zeroed here) from dy, kernel row by kernel row.
template <int V>
__attribute__((target("avx512f"))) void scatter_image(const float* dy, const float* packed, const Dims& d, float* dx) {
  // 4 pixels x up to 7 vectors of sums in registers; the compiler then reads some weight
  // vectors straight from L1 as FMA operands. Measured at LeNet's shape (V = 7): 2.48 ms per
  // 128 images with 4 pixels, 2.8 with 3 (all operands in registers), 3.0-3.5 with 5.
  constexpr int J = 4;
  const int64_t row_floats = d.kw * d.in_c;
  const __mmask16 tail = static_cast<__mmask16>((1u << (row_floats - 16 * (V - 1))) - 1);
  std::memset(dx, 0, static_cast<size_t>(d.in_h * d.in_w * d.in_c) * sizeof(float));
  for (int64_t kh = 0; kh < d.kh; ++kh) {
    const float* packed_row = packed + kh * d.out_c * V * 16;
    for (int64_t oh = 0; oh < d.out_h; ++oh) {
      const float* dy_row = dy + oh * d.out_w * d.out_c;
      float* dx_row = dx + (oh + kh) * d.in_w * d.in_c;
      int64_t ow = 0;
      for (; ow + J <= d.out_w; ow += J)
        scatter_pixels<V, J>(dy_row + ow * d.out_c, d.out_c, packed_row, dx_row + ow * d.in_c, d.in_c, tail);
      for (; ow < d.out_w; ++ow)
        scatter_pixels<V, 1>(dy_row + ow * d.out_c, d.out_c, packed_row, dx_row + ow * d.in_c, d.in_c, tail);
    }
  }
}

template <int V>
void scatter_images(const float* dy, int64_t images, const float* packed, const Dims& d, float* dx) {
  const int64_t dy_image = d.out_h * d.out_w * d.out_c, dx_image = d.in_h * d.in_w * d.in_c;
  // Each image on one of the device's OpenMP threads: the sums do not depend on their number.
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < images; ++n) scatter_image<V>(dy + n * dy_image, packed, d, dx + n * dx_image);
}
}  // namespace

bool scatter_backward_data_fits(const Shape& x, const Shape& weight, ConvGeometry g) {
  const int64_t row_floats = weight[3] * x[1];
  return g.stride == 1 && g.padding == 0 && row_floats <= kMaxVectors * 16;
}

void scatter_backward_data(const float* grad_out_channels_last, const Shape& grad_out_shape, const float* weight,
                           const Shape& weight_shape, const Shape& x_shape, float* grad_x_channels_last) {
  const Dims d{x_shape[2],        x_shape[3],        x_shape[1],      grad_out_shape[2],
               grad_out_shape[3], grad_out_shape[1], weight_shape[2], weight_shape[3]};
  const int64_t vectors = (d.kw * d.in_c + 15) / 16;
  // From the caching allocator, as every per-step buffer (a fresh mapping would page-fault).
  const Tensor packed_weights = Tensor::empty({d.kh * d.out_c * vectors * 16});
  float* packed = packed_weights.data<float>();
  pack_weights(weight, d.out_c, d.in_c, d.kh, d.kw, vectors, packed);
  using ScatterImages = void (*)(const float*, int64_t, const float*, const Dims&, float*);
  constexpr ScatterImages kByVectors[kMaxVectors] = {scatter_images<1>, scatter_images<2>, scatter_images<3>,
                                                     scatter_images<4>, scatter_images<5>, scatter_images<6>,
                                                     scatter_images<7>};
  kByVectors[vectors - 1](grad_out_channels_last, x_shape[0], packed, d, grad_x_channels_last);
}

}  // namespace dpt::ops::cpu
