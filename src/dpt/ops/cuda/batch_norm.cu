// Batch normalization kernels of the CUDA backend. A channel's N*H*W values are summed by
// several blocks (batch_norm_parts of them), each over a contiguous run of the channel in
// (image, pixel) order, so consecutive threads read consecutive addresses and a layer of
// 64 channels still fills the GPU; the blocks' partial sums (in double: a channel of
// ResNet-18's stem at batch 256 sums 262,144 values) are then added in the order of the
// blocks by one thread per channel. No float atomics: the same input gives the same bits
// on every run and on every GPU (the split depends on the shapes alone).
//   statistics: partial sums -> each block of the second pass adds its channel's partial
//     sums for the mean, then sums squared deviations (two passes: no cancellation from
//     E[x^2] - E[x]^2) -> one thread per channel finishes mean and variance;
//   backward: partial sums of g and g * xhat -> one thread per channel finishes
//     grad_gamma and grad_beta -> grad_x elementwise, over the whole tensor.
#include <algorithm>

#include "dpt/ops/cuda/grid.cuh"
#include "dpt/ops/cuda/launch.h"

namespace dpt::ops::cuda {

namespace {
// At least this many values per block, so that a thread sums several before the block's
// reduction; and at most kMaxBlocks blocks over all channels.
constexpr int64_t kValuesPerBlock = 2048;
constexpr int64_t kMaxBlocks = 1024;

// Block `part` of `parts` over the `count` = n * plane values of channel ch of x [n, c, plane]:
// visits each of its values' addresses, consecutive threads at consecutive pixels.
#define DPT_CHANNEL_PART_LOOP(idx, n, c, plane, ch, part, parts)                                  \
  for (int64_t count_ = (n) * (plane), end_ = (count_ * ((part) + 1)) / (parts),                  \
               j = (count_ * (part)) / (parts) + threadIdx.x;                                     \
       j < end_; j += blockDim.x)                                                                 \
    if (const int64_t idx = ((j / (plane)) * (c) + (ch)) * (plane) + j % (plane); true)

__global__ void partial_sum_kernel(const float* x, double* sums, int64_t n, int64_t c, int64_t plane) {
  const int64_t ch = blockIdx.y, part = blockIdx.x, parts = gridDim.x;
  double sum = 0.0;
  DPT_CHANNEL_PART_LOOP(idx, n, c, plane, ch, part, parts) sum += x[idx];
  sum = block_sum(sum);
  if (threadIdx.x == 0) sums[ch * parts + part] = sum;
}

__device__ double channel_total(const double* partials, int64_t ch, int64_t parts) {
  double total = 0.0;
  for (int64_t p = 0; p < parts; ++p) total += partials[ch * parts + p];  // block order: fixed
  return total;
}

__global__ void partial_squares_kernel(const float* x, const double* sums, double* squares, int64_t n, int64_t c,
                                       int64_t plane) {
  const int64_t ch = blockIdx.y, part = blockIdx.x, parts = gridDim.x;
  __shared__ double shared_mean;
  if (threadIdx.x == 0) shared_mean = channel_total(sums, ch, parts) / static_cast<double>(n * plane);
  __syncthreads();
  const double m = shared_mean;
  double sum = 0.0;
  DPT_CHANNEL_PART_LOOP(idx, n, c, plane, ch, part, parts) {
    const double d = x[idx] - m;
    sum += d * d;
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) squares[ch * parts + part] = sum;
}

__global__ void finish_stats_kernel(const double* sums, const double* squares, float* mean, float* variance,
                                    int64_t c, int64_t parts, int64_t count) {
  DPT_GRID_STRIDE_LOOP(ch, c) {
    mean[ch] = static_cast<float>(channel_total(sums, ch, parts) / static_cast<double>(count));
    variance[ch] = static_cast<float>(channel_total(squares, ch, parts) / static_cast<double>(count));
  }
}

__global__ void apply_kernel(const float* x, const float* mean, const float* variance, const float* gamma,
                             const float* beta, float* y, int64_t total, int64_t c, int64_t plane, float eps) {
  DPT_GRID_STRIDE_LOOP(i, total) {
    const int64_t ch = (i / plane) % c;
    y[i] = gamma[ch] * (x[i] - mean[ch]) * rsqrtf(variance[ch] + eps) + beta[ch];
  }
}

__global__ void partial_grad_sums_kernel(const float* g, const float* x, const float* mean, const float* variance,
                                         double* sums_g, double* sums_g_xhat, int64_t n, int64_t c, int64_t plane,
                                         float eps) {
  const int64_t ch = blockIdx.y, part = blockIdx.x, parts = gridDim.x;
  const float m = mean[ch];
  const float inv_std = rsqrtf(variance[ch] + eps);
  double sum_g = 0.0, sum_g_xhat = 0.0;
  DPT_CHANNEL_PART_LOOP(idx, n, c, plane, ch, part, parts) {
    sum_g += g[idx];
    sum_g_xhat += static_cast<double>(g[idx]) * ((x[idx] - m) * inv_std);
  }
  sum_g = block_sum(sum_g);
  sum_g_xhat = block_sum(sum_g_xhat);
  if (threadIdx.x == 0) {
    sums_g[ch * parts + part] = sum_g;
    sums_g_xhat[ch * parts + part] = sum_g_xhat;
  }
}

__global__ void finish_grad_sums_kernel(const double* sums_g, const double* sums_g_xhat, float* grad_gamma,
                                        float* grad_beta, int64_t c, int64_t parts) {
  DPT_GRID_STRIDE_LOOP(ch, c) {
    grad_beta[ch] = static_cast<float>(channel_total(sums_g, ch, parts));
    grad_gamma[ch] = static_cast<float>(channel_total(sums_g_xhat, ch, parts));
  }
}

// grad_gamma and grad_beta are the float sums of g * xhat and g (what finish_grad_sums wrote).
__global__ void grad_x_kernel(const float* g, const float* x, const float* mean, const float* variance,
                              const float* gamma, const float* grad_gamma, const float* grad_beta, float* gx,
                              int64_t total, int64_t c, int64_t plane, float eps, bool batch_stats) {
  const float count = static_cast<float>(total / c);
  DPT_GRID_STRIDE_LOOP(i, total) {
    const int64_t ch = (i / plane) % c;
    const float inv_std = rsqrtf(variance[ch] + eps);
    const float scale = gamma[ch] * inv_std;
    if (batch_stats) {
      const float xhat = (x[i] - mean[ch]) * inv_std;
      gx[i] = scale * (g[i] - grad_beta[ch] / count - xhat * grad_gamma[ch] / count);
    } else {
      gx[i] = scale * g[i];
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

dim3 channel_grid(int64_t n, int64_t c, int64_t plane) {
  return dim3(static_cast<unsigned>(batch_norm_parts(n, c, plane)), static_cast<unsigned>(c));
}
}  // namespace

int64_t batch_norm_parts(int64_t n, int64_t c, int64_t plane) {
  const int64_t by_size = (n * plane + kValuesPerBlock - 1) / kValuesPerBlock;
  const int64_t by_grid = std::max<int64_t>(1, kMaxBlocks / std::max<int64_t>(c, 1));
  return std::clamp<int64_t>(std::min(by_size, by_grid), 1, 65535);
}

void batch_norm_stats(const float* x, float* mean, float* variance, double* scratch, int64_t n, int64_t c,
                      int64_t plane, cudaStream_t s) {
  if (c == 0) return;  // a grid of no blocks is a launch error
  const dim3 grid = channel_grid(n, c, plane);
  double* sums = scratch;
  double* squares = scratch + c * grid.x;
  DPT_LAUNCH(partial_sum_kernel, grid, kThreads, 0, s, x, sums, n, c, plane);
  DPT_LAUNCH(partial_squares_kernel, grid, kThreads, 0, s, x, sums, squares, n, c, plane);
  DPT_LAUNCH(finish_stats_kernel, blocks_for(c), kThreads, 0, s, sums, squares, mean, variance, c,
             static_cast<int64_t>(grid.x), n * plane);
}
void batch_norm_apply(const float* x, const float* mean, const float* variance, const float* gamma, const float* beta,
                      float* y, int64_t n, int64_t c, int64_t plane, float eps, cudaStream_t s) {
  const int64_t total = n * c * plane;
  if (total == 0) return;
  DPT_LAUNCH(apply_kernel, blocks_for(total), kThreads, 0, s, x, mean, variance, gamma, beta, y, total, c, plane, eps);
}
void batch_norm_backward(const float* g, const float* x, const float* mean, const float* variance, const float* gamma,
                         float* gx, float* grad_gamma, float* grad_beta, double* scratch, int64_t n, int64_t c,
                         int64_t plane, float eps, bool batch_stats, cudaStream_t s) {
  if (c == 0) return;
  const dim3 grid = channel_grid(n, c, plane);
  double* sums_g = scratch;
  double* sums_g_xhat = scratch + c * grid.x;
  DPT_LAUNCH(partial_grad_sums_kernel, grid, kThreads, 0, s, g, x, mean, variance, sums_g, sums_g_xhat, n, c, plane,
             eps);
  DPT_LAUNCH(finish_grad_sums_kernel, blocks_for(c), kThreads, 0, s, sums_g, sums_g_xhat, grad_gamma, grad_beta, c,
             static_cast<int64_t>(grid.x));
  const int64_t total = n * c * plane;
  if (!gx || total == 0) return;
  DPT_LAUNCH(grad_x_kernel, blocks_for(total), kThreads, 0, s, g, x, mean, variance, gamma, grad_gamma, grad_beta, gx,
             total, c, plane, eps, batch_stats);
}
void batch_norm_update_running(float* rm, float* rv, const float* mean, const float* variance, int64_t c,
                               float momentum, double unbiased, cudaStream_t s) {
  DPT_LAUNCH(running_kernel, blocks_for(c), kThreads, 0, s, rm, rv, mean, variance, c, momentum, unbiased);
}

}  // namespace dpt::ops::cuda
