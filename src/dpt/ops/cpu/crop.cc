// Backend::crop_corner and pad_corner: the top-left corner of every plane, and back. Both
// run channels-last, where a row of the corner is one contiguous run of w x C floats, and
// write channels-last, the layout LeNet's convolutions read and write on AVX-512.
#include <cstring>

#include "dpt/ops/cpu/kernels.h"
#include "dpt/ops/cpu/layout.h"

namespace dpt::ops::cpu {

Tensor crop_corner(const Tensor& x, int64_t h, int64_t w) {
  const int64_t images = x.dim(0), channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  Tensor scratch;
  const float* from = channels_last_data(x, scratch);
  const LaidOutTensor out = channels_last_output({images, channels, h, w});
  auto* to = static_cast<float*>(out.memory.get_data_handle());
  const size_t row_bytes = static_cast<size_t>(w * channels) * sizeof(float);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < images; ++n) {
    for (int64_t r = 0; r < h; ++r) {
      std::memcpy(to + (n * h + r) * w * channels, from + (n * height + r) * width * channels, row_bytes);
    }
  }
  return out.tensor;
}

Tensor pad_corner(const Tensor& grad, const Shape& x_shape) {
  const int64_t images = x_shape[0], channels = x_shape[1], height = x_shape[2], width = x_shape[3];
  const int64_t h = grad.dim(2), w = grad.dim(3);
  Tensor scratch;
  const float* from = channels_last_data(grad, scratch);
  const LaidOutTensor out = channels_last_output(x_shape);
  auto* to = static_cast<float*>(out.memory.get_data_handle());
  const int64_t kept = w * channels, row = width * channels;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < images; ++n) {
    for (int64_t r = 0; r < height; ++r) {
      float* dst = to + (n * height + r) * row;
      const int64_t copied = r < h ? kept : 0;
      if (copied > 0) std::memcpy(dst, from + (n * h + r) * kept, static_cast<size_t>(kept) * sizeof(float));
      std::memset(dst + copied, 0, static_cast<size_t>(row - copied) * sizeof(float));
    }
  }
  return out.tensor;
}

}  // namespace dpt::ops::cpu
