// Batch normalization kernels of the CUDA backend: one block per channel for the per-channel
// sums (accumulated in double: a channel of ResNet-18's stem at batch 256 sums 262,144
// values), a grid-stride loop for the normalization itself.
#include "dpt/ops/cuda/grid.cuh"
#include "dpt/ops/cuda/launch.h"

namespace dpt::ops::cuda {

namespace {
// The elements of channel ch in x [N, C, plane], visited by the threads of one block.
#define DPT_CHANNEL_LOOP(idx, n, c, plane, ch)                      \
  for (int64_t j = threadIdx.x; j < (n) * (plane); j += blockDim.x) \
    if (const int64_t idx = ((j / (plane)) * (c) + (ch)) * (plane) + j % (plane); true)

__global__ void stats_kernel(const float* x, float* mean, float* variance, int64_t n, int64_t c, int64_t plane) {
  const int64_t ch = blockIdx.x;
  __shared__ double shared_mean;
  double sum = 0.0;
  DPT_CHANNEL_LOOP(idx, n, c, plane, ch) sum += x[idx];
  sum = block_sum(sum);
  if (threadIdx.x == 0) shared_mean = sum / static_cast<double>(n * plane);
  __syncthreads();
  const double m = shared_mean;
  double squares = 0.0;  // two passes: no cancellation from E[x^2] - E[x]^2
  DPT_CHANNEL_LOOP(idx, n, c, plane, ch) {
    const double d = x[idx] - m;
    squares += d * d;
  }
  squares = block_sum(squares);
  if (threadIdx.x == 0) {
    mean[ch] = static_cast<float>(m);
    variance[ch] = static_cast<float>(squares / static_cast<double>(n * plane));
  }
}

__global__ void apply_kernel(const float* x, const float* mean, const float* variance, const float* gamma,
                             const float* beta, float* y, int64_t total, int64_t c, int64_t plane, float eps) {
  DPT_GRID_STRIDE_LOOP(i, total) {
    const int64_t ch = (i / plane) % c;
    y[i] = gamma[ch] * (x[i] - mean[ch]) * rsqrtf(variance[ch] + eps) + beta[ch];
  }
}

__global__ void backward_kernel(const float* g, const float* x, const float* mean, const float* variance,
                                const float* gamma, float* gx, float* grad_gamma, float* grad_beta, int64_t n,
                                int64_t c, int64_t plane, float eps, bool batch_stats) {
  const int64_t ch = blockIdx.x;
  const float m = mean[ch];
  const float inv_std = rsqrtf(variance[ch] + eps);
  double sum_g = 0.0, sum_g_xhat = 0.0;
  DPT_CHANNEL_LOOP(idx, n, c, plane, ch) {
    sum_g += g[idx];
    sum_g_xhat += static_cast<double>(g[idx]) * ((x[idx] - m) * inv_std);
  }
  sum_g = block_sum(sum_g);
  sum_g_xhat = block_sum(sum_g_xhat);
  __shared__ float shared_g, shared_g_xhat;
  if (threadIdx.x == 0) {
    grad_beta[ch] = static_cast<float>(sum_g);
    grad_gamma[ch] = static_cast<float>(sum_g_xhat);
    shared_g = static_cast<float>(sum_g);
    shared_g_xhat = static_cast<float>(sum_g_xhat);
  }
  __syncthreads();
  if (!gx) return;
  const float scale = gamma[ch] * inv_std;
  const float count = static_cast<float>(n * plane);
  DPT_CHANNEL_LOOP(idx, n, c, plane, ch) {
    if (batch_stats) {
      const float xhat = (x[idx] - m) * inv_std;
      gx[idx] = scale * (g[idx] - shared_g / count - xhat * shared_g_xhat / count);
    } else {
      gx[idx] = scale * g[idx];
    }
  }
}

__global__ void running_kernel(float* rm, float* rv, const float* mean, const float* variance, int64_t c,
                               float momentum, double unbiased) {
  DPT_GRID_STRIDE_LOOP(ch, c) {
    rm[ch] = static_cast<float>((1.0 - momentum) * rm[ch] + momentum * static_cast<double>(mean[ch]));
    rv[ch] = static_cast<float>((1.0 - momentum) * rv[ch] + momentum * unbiased * static_cast<double>(variance[ch]));
  }
}
}  // namespace

void batch_norm_stats(const float* x, float* mean, float* variance, int64_t n, int64_t c, int64_t plane,
                      cudaStream_t s) {
  DPT_LAUNCH(stats_kernel, static_cast<unsigned>(c), kThreads, 0, s, x, mean, variance, n, c, plane);
}
void batch_norm_apply(const float* x, const float* mean, const float* variance, const float* gamma, const float* beta,
                      float* y, int64_t n, int64_t c, int64_t plane, float eps, cudaStream_t s) {
  const int64_t total = n * c * plane;
  DPT_LAUNCH(apply_kernel, blocks_for(total), kThreads, 0, s, x, mean, variance, gamma, beta, y, total, c, plane, eps);
}
void batch_norm_backward(const float* g, const float* x, const float* mean, const float* variance, const float* gamma,
                         float* gx, float* grad_gamma, float* grad_beta, int64_t n, int64_t c, int64_t plane, float eps,
                         bool batch_stats, cudaStream_t s) {
  DPT_LAUNCH(backward_kernel, static_cast<unsigned>(c), kThreads, 0, s, g, x, mean, variance, gamma, gx, grad_gamma,
             grad_beta, n, c, plane, eps, batch_stats);
}
void batch_norm_update_running(float* rm, float* rv, const float* mean, const float* variance, int64_t c,
                               float momentum, double unbiased, cudaStream_t s) {
  DPT_LAUNCH(running_kernel, blocks_for(c), kThreads, 0, s, rm, rv, mean, variance, c, momentum, unbiased);
}

}  // namespace dpt::ops::cuda
