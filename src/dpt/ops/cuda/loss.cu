// Loss (softmax cross-entropy, squared error), argmax and accuracy kernels of the CUDA
// backend: one thread per example (K is 10 here; a row is short).
#include "dpt/ops/cuda/grid.cuh"
#include "dpt/ops/cuda/launch.h"

namespace dpt::ops::cuda {

namespace {
__global__ void softmax_ce_kernel(const float* z, const int64_t* y, float* p, float* l, int64_t n, int64_t k,
                                  float smoothing) {
  DPT_GRID_STRIDE_LOOP(i, n) {
    const float* row = z + i * k;
    float max = row[0];
    for (int64_t j = 1; j < k; ++j) max = fmaxf(max, row[j]);
    double sum = 0.0;  // as the CPU backend: the exponentials summed in double
    for (int64_t j = 0; j < k; ++j) sum += exp(static_cast<double>(row[j] - max));
    const double log_sum = log(sum);
    for (int64_t j = 0; j < k; ++j) p[i * k + j] = static_cast<float>(exp(row[j] - max - log_sum));
    const int64_t label = y[i];
    if (label < 0 || label >= k) {
      l[i] = 0.0f;
      continue;
    }
    double loss = log_sum - (row[label] - max);
    if (smoothing > 0.0f) {  // as the CPU backend: (1 - s)(-log p_iy) + s mean_j(-log p_ij)
      double mean = 0.0;
      for (int64_t j = 0; j < k; ++j) mean += log_sum - (row[j] - max);
      loss = (1.0 - smoothing) * loss + smoothing * mean / static_cast<double>(k);
    }
    l[i] = static_cast<float>(loss);
  }
}
__global__ void sum_scaled_kernel(const float* v, float* out, int64_t n, float scale) {
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += v[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0) out[0] = static_cast<float>(sum * scale);
}
__global__ void ce_backward_kernel(const float* p, const int64_t* y, const float* go, float* g, int64_t n, int64_t k,
                                   bool per_example, float factor, float smoothing) {
  const float spread = smoothing / static_cast<float>(k);
  DPT_GRID_STRIDE_LOOP(e, n * k) {
    const int64_t i = e / k, j = e % k;
    const float scale = (per_example ? go[i] : go[0]) * factor;
    g[e] = ((p[e] - (j == y[i] ? 1.0f - smoothing : 0.0f)) - spread) * scale;
  }
}
__global__ void squared_error_kernel(const float* x, const float* t, float* l, int64_t n, int64_t k) {
  DPT_GRID_STRIDE_LOOP(i, n) {
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      const double d = static_cast<double>(x[i * k + j]) - t[i * k + j];
      sum += d * d;
    }
    l[i] = static_cast<float>(sum / static_cast<double>(k));
  }
}
__global__ void squared_error_backward_kernel(const float* x, const float* t, const float* go, float* g, int64_t n,
                                              int64_t k, bool per_example, float factor) {
  DPT_GRID_STRIDE_LOOP(e, n * k) {
    const int64_t i = e / k;
    const float scale = 2.0f * (per_example ? go[i] : go[0]) * factor / static_cast<float>(k);
    g[e] = (x[e] - t[e]) * scale;
  }
}
__device__ int64_t row_argmax(const float* row, int64_t k) {
  int64_t best = 0;
  for (int64_t j = 1; j < k; ++j) best = row[j] > row[best] ? j : best;  // the first maximum wins
  return best;
}
__global__ void argmax_kernel(const float* x, int64_t* out, int64_t n, int64_t k) {
  DPT_GRID_STRIDE_LOOP(i, n) out[i] = row_argmax(x + i * k, k);
}
__global__ void count_correct_kernel(const float* x, const int64_t* y, unsigned long long* correct, int64_t n,
                                     int64_t k) {
  DPT_GRID_STRIDE_LOOP(i, n) {
    if (row_argmax(x + i * k, k) == y[i]) atomicAdd(correct, 1ull);
  }
}
}  // namespace

void softmax_cross_entropy(const float* logits, const int64_t* labels, float* probs, float* losses, int64_t n,
                           int64_t k, float label_smoothing, cudaStream_t s) {
  DPT_LAUNCH(softmax_ce_kernel, blocks_for(n), kThreads, 0, s, logits, labels, probs, losses, n, k, label_smoothing);
}
void sum_scaled(const float* v, float* out, int64_t n, float scale, cudaStream_t s) {
  DPT_LAUNCH(sum_scaled_kernel, 1, kThreads, 0, s, v, out, n, scale);
}
void cross_entropy_backward(const float* probs, const int64_t* labels, const float* grad_out, float* grad, int64_t n,
                            int64_t k, bool per_example, float factor, float label_smoothing, cudaStream_t s) {
  DPT_LAUNCH(ce_backward_kernel, blocks_for(n * k), kThreads, 0, s, probs, labels, grad_out, grad, n, k, per_example,
             factor, label_smoothing);
}
void squared_error_rows(const float* x, const float* t, float* losses, int64_t n, int64_t k, cudaStream_t s) {
  DPT_LAUNCH(squared_error_kernel, blocks_for(n), kThreads, 0, s, x, t, losses, n, k);
}
void squared_error_backward(const float* x, const float* t, const float* grad_out, float* grad, int64_t n, int64_t k,
                            bool per_example, float factor, cudaStream_t s) {
  DPT_LAUNCH(squared_error_backward_kernel, blocks_for(n * k), kThreads, 0, s, x, t, grad_out, grad, n, k,
             per_example, factor);
}
void argmax_rows(const float* x, int64_t* out, int64_t n, int64_t k, cudaStream_t s) {
  DPT_LAUNCH(argmax_kernel, blocks_for(n), kThreads, 0, s, x, out, n, k);
}
void count_correct(const float* logits, const int64_t* labels, unsigned long long* correct, int64_t n, int64_t k,
                   cudaStream_t s) {
  DPT_LAUNCH(count_correct_kernel, blocks_for(n), kThreads, 0, s, logits, labels, correct, n, k);
}

}  // namespace dpt::ops::cuda
