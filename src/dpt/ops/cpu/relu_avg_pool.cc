// The backward of LeNet's conv -> ReLU -> average pooling block, from the pooled gradient to
// the convolution's, in one pass: oneDNN's pooling backward writes the spread gradient (6.9 MB
// per 128-image shard after LeNet's conv1) and its ReLU backward reads it back with the
// ReLU's output and writes it again; here each output row is written once. Channels-last,
// the layout LeNet's convolutions run in on AVX-512 (other layouts are reordered to it).
#include <cstring>
#include <vector>

#include "dpt/core/cpu_features.h"
#include "dpt/ops/cpu/dnnl_context.h"
#include "dpt/ops/cpu/kernels.h"
#include "dpt/ops/cpu/layout.h"

namespace dpt::ops::cpu {

namespace {
using Vec16 = float __attribute__((vector_size(64)));

// out[i] = relu_out[i] > 0 ? spread[i] : 0, as oneDNN's ReLU backward masks.
DPT_INLINE_BODY void mask_by_relu_body(const float* relu_out, const float* spread, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    Vec16 y, s;
    std::memcpy(&y, relu_out + i, sizeof y);
    std::memcpy(&s, spread + i, sizeof s);
    const Vec16 masked = y > 0.0f ? s : Vec16{};
    std::memcpy(out + i, &masked, sizeof masked);
  }
  for (; i < n; ++i) out[i] = relu_out[i] > 0.0f ? spread[i] : 0.0f;
}
DPT_AVX512_VARIANT void mask_by_relu_avx512(const float* relu_out, const float* spread, float* out, int64_t n) {
  mask_by_relu_body(relu_out, spread, out, n);
}
void mask_by_relu_portable(const float* relu_out, const float* spread, float* out, int64_t n) {
  mask_by_relu_body(relu_out, spread, out, n);
}
void mask_by_relu(const float* relu_out, const float* spread, float* out, int64_t n) {
  cpu_has_avx512f() ? mask_by_relu_avx512(relu_out, spread, out, n) : mask_by_relu_portable(relu_out, spread, out, n);
}
}  // namespace

Tensor relu_avg_pool_backward(const Tensor& grad_pooled, const Tensor& relu_out, int pool) {
  const int64_t images = relu_out.dim(0), channels = relu_out.dim(1), height = relu_out.dim(2), width = relu_out.dim(3);
  const int64_t pooled_h = grad_pooled.dim(2), pooled_w = grad_pooled.dim(3);
  Tensor y_scratch, dp_scratch;
  const float* y = channels_last_data(relu_out, y_scratch);
  const float* dp = channels_last_data(grad_pooled, dp_scratch);
  const LaidOutTensor grad_z = channels_last_output(relu_out.shape());
  auto* dz = static_cast<float*>(grad_z.memory.get_data_handle());

  // One row of the pooled gradient spread over its windows: shared by the `pool` rows of
  // each window. Columns the pooling dropped stay 0. The images are split over the device's
  // OpenMP threads, as its oneDNN primitives split their work.
  const int64_t row = width * channels;
  const float area = static_cast<float>(pool * pool);
#pragma omp parallel
  {
    std::vector<float> spread(static_cast<size_t>(row), 0.0f);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < images; ++n) {
      for (int64_t h = 0; h < height; ++h) {
        float* out = dz + (n * height + h) * row;
        if (h / pool >= pooled_h) {  // a row the pooling dropped
          std::memset(out, 0, static_cast<size_t>(row) * sizeof(float));
          continue;
        }
        if (h % pool == 0) {
          const float* pooled_row = dp + (n * pooled_h + h / pool) * pooled_w * channels;
          for (int64_t pw = 0; pw < pooled_w; ++pw)
            for (int64_t k = 0; k < pool; ++k)
              for (int64_t c = 0; c < channels; ++c)
                spread[static_cast<size_t>((pw * pool + k) * channels + c)] = pooled_row[pw * channels + c] / area;
        }
        mask_by_relu(y + (n * height + h) * row, spread.data(), out, row);
      }
    }
  }
  return grad_z.tensor;
}

}  // namespace dpt::ops::cpu
