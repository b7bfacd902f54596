// Elementwise kernels and small reductions of the CUDA backend (see launch.h).
#include "dpt/ops/adaptive_bins.h"
#include "dpt/ops/cuda/grid.cuh"
#include "dpt/ops/cuda/launch.h"

namespace dpt::ops::cuda {

namespace {
// a(x) and a'(x) for one value (ops/activation.h).
__device__ float activate(float x, ops::Activation a) {
  switch (a) {
    case ops::Activation::relu: return x > 0.0f ? x : 0.0f;
    case ops::Activation::sigmoid: return 1.0f / (1.0f + expf(-x));
    case ops::Activation::tanh: return tanhf(x);
    case ops::Activation::gelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  }
  return x;
}
__device__ float derivative(float x, ops::Activation a) {
  switch (a) {
    case ops::Activation::relu: return x > 0.0f ? 1.0f : 0.0f;
    case ops::Activation::sigmoid: {
      const float s = 1.0f / (1.0f + expf(-x));
      return s * (1.0f - s);
    }
    case ops::Activation::tanh: {
      const float t = tanhf(x);
      return 1.0f - t * t;
    }
    case ops::Activation::gelu:  // Phi(x) + x phi(x)
      return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) + x * 0.39894228040143268f * expf(-0.5f * x * x);
  }
  return 1.0f;
}
__global__ void activation_forward_kernel(const float* x, float* y, int64_t n, ops::Activation a) {
  DPT_GRID_STRIDE_LOOP(i, n) y[i] = activate(x[i], a);
}
__global__ void activation_backward_kernel(const float* g, const float* x, float* gx, int64_t n, ops::Activation a) {
  DPT_GRID_STRIDE_LOOP(i, n) gx[i] = g[i] * derivative(x[i], a);
}
__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  DPT_GRID_STRIDE_LOOP(i, n) out[i] = a[i] + b[i];
}
__global__ void multiply_kernel(const float* a, const float* b, float* out, int64_t n) {
  DPT_GRID_STRIDE_LOOP(i, n) out[i] = a[i] * b[i];
}
__global__ void accumulate_kernel(float* into, const float* from, int64_t n) {
  DPT_GRID_STRIDE_LOOP(i, n) into[i] += from[i];
}
__global__ void scale_copy_kernel(const float* in, float* out, int64_t n, float scale) {
  DPT_GRID_STRIDE_LOOP(i, n) out[i] = in[i] * scale;
}
__global__ void sgd_kernel(float* p, const float* g, float* v, int64_t n, float lr, float momentum, float decay,
                           bool first, bool nesterov) {
  DPT_GRID_STRIDE_LOOP(i, n) {
    float d = decay == 0.0f ? g[i] : g[i] + decay * p[i];
    if (v) {
      v[i] = first ? d : momentum * v[i] + d;
      d = nesterov ? d + momentum * v[i] : v[i];
    }
    p[i] -= lr * d;
  }
}
__global__ void adam_kernel(float* p, const float* g, float* m, float* v, int64_t n, float step_size, float sqrt_bc2,
                            float shrink, float l2, float beta1, float beta2, float eps) {
  DPT_GRID_STRIDE_LOOP(i, n) {
    const float gi = g[i] + l2 * p[i];
    p[i] *= shrink;
    m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
    v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    p[i] -= step_size * m[i] / (sqrtf(v[i]) / sqrt_bc2 + eps);
  }
}
__global__ void channel_bias_kernel(float* y, const float* bias, int64_t total, int64_t c, int64_t plane, bool relu) {
  DPT_GRID_STRIDE_LOOP(i, total) {
    const float v = y[i] + bias[(i / plane) % c];
    y[i] = relu && v < 0.0f ? 0.0f : v;
  }
}
__global__ void row_bias_kernel(float* y, const float* bias, int64_t total, int64_t cols) {
  DPT_GRID_STRIDE_LOOP(i, total) y[i] += bias[i % cols];
}
// One block per kSumTile columns: threadIdx.x picks the column, so that a warp reads
// kSumTile consecutive floats of a row (coalesced), threadIdx.y a set of rows; the
// kSumRowGroups partial sums of a column are then added in a fixed order (deterministic).
constexpr int kSumTile = 32, kSumRowGroups = kThreads / kSumTile;
__global__ void sum_rows_kernel(const float* m, float* out, int64_t rows, int64_t cols) {
  __shared__ float partial[kSumRowGroups][kSumTile];
  const int64_t j = blockIdx.x * static_cast<int64_t>(kSumTile) + threadIdx.x;
  float sum = 0.0f;
  if (j < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += kSumRowGroups) sum += m[r * cols + j];
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && j < cols) {
    float total = 0.0f;
    for (int g = 0; g < kSumRowGroups; ++g) total += partial[g][threadIdx.x];
    out[j] = total;
  }
}
// One block per plane.
__global__ void plane_mean_kernel(const float* x, float* out, int64_t plane) {
  const float* p = x + blockIdx.x * plane;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < plane; i += blockDim.x) sum += p[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0) out[blockIdx.x] = sum / static_cast<float>(plane);
}
// One thread per output value; backward one thread per input value, summing the shares of
// the bins that hold it (no atomics: the same order every run).
__global__ void adaptive_avg_pool_kernel(const float* x, float* out, int64_t planes, int64_t h, int64_t w,
                                         int64_t out_h, int64_t out_w) {
  DPT_GRID_STRIDE_LOOP(e, planes * out_h * out_w) {
    const int64_t p = e / (out_h * out_w), i = e / out_w % out_h, j = e % out_w;
    const ops::AdaptiveBin rows = ops::adaptive_bin(i, h, out_h), cols = ops::adaptive_bin(j, w, out_w);
    float sum = 0.0f;
    for (int64_t r = rows.begin; r < rows.end; ++r)
      for (int64_t c = cols.begin; c < cols.end; ++c) sum += x[(p * h + r) * w + c];
    out[e] = sum / static_cast<float>(rows.size() * cols.size());
  }
}
__global__ void adaptive_avg_pool_backward_kernel(const float* g, float* gx, int64_t planes, int64_t h, int64_t w,
                                                  int64_t out_h, int64_t out_w) {
  DPT_GRID_STRIDE_LOOP(e, planes * h * w) {
    const int64_t p = e / (h * w), r = e / w % h, c = e % w;
    float sum = 0.0f;
    for (int64_t i = r * out_h / h; i < out_h && ops::adaptive_bin(i, h, out_h).begin <= r; ++i) {
      const ops::AdaptiveBin rows = ops::adaptive_bin(i, h, out_h);
      if (r >= rows.end) continue;
      for (int64_t j = c * out_w / w; j < out_w && ops::adaptive_bin(j, w, out_w).begin <= c; ++j) {
        const ops::AdaptiveBin cols = ops::adaptive_bin(j, w, out_w);
        if (c >= cols.end) continue;
        sum += g[(p * out_h + i) * out_w + j] / static_cast<float>(rows.size() * cols.size());
      }
    }
    gx[e] = sum;
  }
}
__global__ void plane_mean_backward_kernel(const float* g, float* gx, int64_t total, int64_t plane) {
  DPT_GRID_STRIDE_LOOP(i, total) gx[i] = g[i / plane] / static_cast<float>(plane);
}
}  // namespace

void activation_forward(const float* x, float* y, int64_t n, ops::Activation a, cudaStream_t s) {
  DPT_LAUNCH(activation_forward_kernel, blocks_for(n), kThreads, 0, s, x, y, n, a);
}
void activation_backward(const float* g, const float* x, float* gx, int64_t n, ops::Activation a, cudaStream_t s) {
  DPT_LAUNCH(activation_backward_kernel, blocks_for(n), kThreads, 0, s, g, x, gx, n, a);
}
void add(const float* a, const float* b, float* out, int64_t n, cudaStream_t s) {
  DPT_LAUNCH(add_kernel, blocks_for(n), kThreads, 0, s, a, b, out, n);
}
void adaptive_avg_pool(const float* x, float* out, int64_t planes, int64_t h, int64_t w, int64_t out_h, int64_t out_w,
                       cudaStream_t s) {
  DPT_LAUNCH(adaptive_avg_pool_kernel, blocks_for(planes * out_h * out_w), kThreads, 0, s, x, out, planes, h, w, out_h,
             out_w);
}
void adaptive_avg_pool_backward(const float* grad_out, float* grad_x, int64_t planes, int64_t h, int64_t w,
                                int64_t out_h, int64_t out_w, cudaStream_t s) {
  DPT_LAUNCH(adaptive_avg_pool_backward_kernel, blocks_for(planes * h * w), kThreads, 0, s, grad_out, grad_x, planes,
             h, w, out_h, out_w);
}
void multiply(const float* a, const float* b, float* out, int64_t n, cudaStream_t s) {
  DPT_LAUNCH(multiply_kernel, blocks_for(n), kThreads, 0, s, a, b, out, n);
}
void accumulate(float* into, const float* from, int64_t n, cudaStream_t s) {
  DPT_LAUNCH(accumulate_kernel, blocks_for(n), kThreads, 0, s, into, from, n);
}
void scale_copy(const float* in, float* out, int64_t n, float scale, cudaStream_t s) {
  DPT_LAUNCH(scale_copy_kernel, blocks_for(n), kThreads, 0, s, in, out, n, scale);
}
void sgd_update(float* p, const float* g, float* v, int64_t n, const ops::SgdStep& t, cudaStream_t s) {
  DPT_LAUNCH(sgd_kernel, blocks_for(n), kThreads, 0, s, p, g, v, n, t.lr, t.momentum, t.decay, t.first, t.nesterov);
}
void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const ops::AdamStep& t, cudaStream_t s) {
  DPT_LAUNCH(adam_kernel, blocks_for(n), kThreads, 0, s, p, g, m, v, n, t.lr / t.bias_correction1,
             sqrtf(t.bias_correction2), t.decoupled ? 1.0f - t.lr * t.decay : 1.0f, t.decoupled ? 0.0f : t.decay,
             t.beta1, t.beta2, t.eps);
}
void add_channel_bias(float* y, const float* bias, int64_t n, int64_t c, int64_t plane, bool relu, cudaStream_t s) {
  const int64_t total = n * c * plane;
  DPT_LAUNCH(channel_bias_kernel, blocks_for(total), kThreads, 0, s, y, bias, total, c, plane, relu);
}
void add_row_bias(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t s) {
  DPT_LAUNCH(row_bias_kernel, blocks_for(rows * cols), kThreads, 0, s, y, bias, rows * cols, cols);
}
void sum_rows(const float* m, float* out, int64_t rows, int64_t cols, cudaStream_t s) {
  if (cols == 0) return;  // a grid of no blocks is a launch error
  const auto tiles = static_cast<unsigned>((cols + kSumTile - 1) / kSumTile);
  DPT_LAUNCH(sum_rows_kernel, tiles, dim3(kSumTile, kSumRowGroups), 0, s, m, out, rows, cols);
}
void plane_mean(const float* x, float* out, int64_t planes, int64_t plane, cudaStream_t s) {
  if (planes == 0) return;
  DPT_LAUNCH(plane_mean_kernel, static_cast<unsigned>(planes), kThreads, 0, s, x, out, plane);
}
void plane_mean_backward(const float* g, float* gx, int64_t planes, int64_t plane, cudaStream_t s) {
  DPT_LAUNCH(plane_mean_backward_kernel, blocks_for(planes * plane), kThreads, 0, s, g, gx, planes * plane, plane);
}

}  // namespace dpt::ops::cuda
