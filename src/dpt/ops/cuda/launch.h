// Our own CUDA kernels (the .cu files beside this), as plain launch functions on raw device
// pointers and a stream, for cuda_backend.cc. Each queues its kernel and returns; sizes are
// element counts; images are NCHW, matrices row-major. Every launch is checked
// (DPT_LAUNCH): a launch that fails throws std::runtime_error naming the kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "dpt/cuda/context.h"
#include "dpt/ops/activation.h"
#include "dpt/ops/update_steps.h"

// Queues kernel<<<grid, block, shared_bytes, stream>>>(args...) and checks the launch with
// dpt::cuda::after_op under the kernel's name (and, with DPT_CUDA_SYNC_CHECK=1, waits for
// it and checks what it did). The one way the .cu files launch a kernel.
#define DPT_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)      \
  do {                                                                  \
    kernel<<<(grid), (block), (shared_bytes), (stream)>>>(__VA_ARGS__); \
    ::dpt::cuda::after_op(#kernel, (stream));                           \
  } while (0)

namespace dpt::ops::cuda {

// elementwise.cu
// y = a(x) and grad_x = grad_out * a'(x) (ops/activation.h); y may be x.
void activation_forward(const float* x, float* y, int64_t n, ops::Activation a, cudaStream_t stream);
void activation_backward(const float* grad_out, const float* x, float* grad_x, int64_t n, ops::Activation a,
                         cudaStream_t stream);
inline void relu_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  activation_forward(x, y, n, ops::Activation::relu, stream);
}
void add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
void multiply(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
void accumulate(float* into, const float* from, int64_t n, cudaStream_t stream);
// param -= lr * d, d = grad + decay * param, through the velocity when one is given
// (velocity = first ? d : momentum * velocity + d; d = nesterov ? d + momentum * velocity
// : velocity): ops::Backend::sgd_update.
void sgd_update(float* param, const float* grad, float* velocity, int64_t n, const ops::SgdStep& step,
                cudaStream_t stream);
// One Adam/AdamW step in place (ops::Backend::adam_update).
void adam_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n, const ops::AdamStep& step,
                 cudaStream_t stream);
// out[i] = in[i] * scale.
void scale_copy(const float* in, float* out, int64_t n, float scale, cudaStream_t stream);
// y[n, c, i] += bias[c] over an [N, C, plane] tensor, then relu when asked.
void add_channel_bias(float* y, const float* bias, int64_t n, int64_t c, int64_t plane, bool relu, cudaStream_t stream);
// y[r, j] += bias[j] over a [rows, cols] matrix.
void add_row_bias(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);
// out[j] = sum over rows of m[r, j].
void sum_rows(const float* m, float* out, int64_t rows, int64_t cols, cudaStream_t stream);
// out[n, c] = mean of x[n, c, :] over a plane; backward spreads grad / plane.
void plane_mean(const float* x, float* out, int64_t planes, int64_t plane, cudaStream_t stream);
void plane_mean_backward(const float* grad_out, float* grad_x, int64_t planes, int64_t plane, cudaStream_t stream);
// Adaptive average pooling of `planes` planes h x w into out_h x out_w (ops/adaptive_bins.h).
void adaptive_avg_pool(const float* x, float* out, int64_t planes, int64_t h, int64_t w, int64_t out_h, int64_t out_w,
                       cudaStream_t stream);
void adaptive_avg_pool_backward(const float* grad_out, float* grad_x, int64_t planes, int64_t h, int64_t w,
                                int64_t out_h, int64_t out_w, cudaStream_t stream);

// batch_norm.cu: per channel c of x [N, C, plane]. eps is added to the variance. The sums
// over a channel are split over batch_norm_parts(n, c, plane) blocks; `scratch` is device
// memory for 2 * c * batch_norm_parts(n, c, plane) doubles of their partial sums.
int64_t batch_norm_parts(int64_t n, int64_t c, int64_t plane);
void batch_norm_stats(const float* x, float* mean, float* variance, double* scratch, int64_t n, int64_t c,
                      int64_t plane, cudaStream_t stream);
void batch_norm_apply(const float* x, const float* mean, const float* variance, const float* gamma, const float* beta,
                      float* y, int64_t n, int64_t c, int64_t plane, float eps, cudaStream_t stream);
// grad_gamma = sum(g * xhat), grad_beta = sum(g); grad_x as for batch statistics when
// batch_stats, else gamma * g / sqrt(var + eps). grad_gamma and grad_beta are always written;
// grad_x when not null.
void batch_norm_backward(const float* grad_out, const float* x, const float* mean, const float* variance,
                         const float* gamma, float* grad_x, float* grad_gamma, float* grad_beta, double* scratch,
                         int64_t n, int64_t c, int64_t plane, float eps, bool batch_stats, cudaStream_t stream);
void batch_norm_update_running(float* running_mean, float* running_var, const float* mean, const float* variance,
                               int64_t c, float momentum, double unbiased, cudaStream_t stream);

// loss.cu. Labels are int64, checked by the caller on the host (ops::check_labels): one
// outside [0, k) gets loss 0 here and is never used as an index.
// Smoothed by s (Backend::cross_entropy_forward; 0: plain).
void softmax_cross_entropy(const float* logits, const int64_t* labels, float* probs, float* losses, int64_t n,
                           int64_t k, float label_smoothing, cudaStream_t stream);
// out[0] = sum of v[0..n) times scale, in one block.
void sum_scaled(const float* v, float* out, int64_t n, float scale, cudaStream_t stream);
// grad = (probs - target) * scale_i, target = (1 - s) onehot(labels) + s / k,
// scale_i = grad_out[per_example ? i : 0] * factor.
void cross_entropy_backward(const float* probs, const int64_t* labels, const float* grad_out, float* grad, int64_t n,
                            int64_t k, bool per_example, float factor, float label_smoothing, cudaStream_t stream);
// losses[i] = mean over its k values of (x - t)^2, one thread per row, summed in double.
void squared_error_rows(const float* x, const float* t, float* losses, int64_t n, int64_t k, cudaStream_t stream);
// grad = 2 (x - t) / k * scale_i, scale_i as in cross_entropy_backward.
void squared_error_backward(const float* x, const float* t, const float* grad_out, float* grad, int64_t n, int64_t k,
                            bool per_example, float factor, cudaStream_t stream);
void argmax_rows(const float* x, int64_t* out, int64_t n, int64_t k, cudaStream_t stream);
// correct[0] += rows whose argmax (first maximum, as std::max_element) equals the label.
void count_correct(const float* logits, const int64_t* labels, unsigned long long* correct, int64_t n, int64_t k,
                   cudaStream_t stream);

// ledger.cu: the step ledger's kernels (ops/ledger.h), on an int64 [kLedgerSlots] ledger.
// ledger[kLossSum] (a double) += loss_sum[0]; a non-finite loss sets its bit in kLossNonFinite.
void add_step_loss(int64_t* ledger, const float* loss_sum, cudaStream_t stream);
// slots[0] += the non-finite values of values[0..n); slots[1] keeps the first one's index
// and kind, encoded for commit_non_finite. slots: two zeroed counters per scanned tensor.
void scan_non_finite(const float* values, int64_t n, unsigned long long* slots, cudaStream_t stream);
// Ends update `tag` from the scans of `tensors` tensors (slots[2 * t], slots[2 * t + 1]) and
// the ledger's loss bits: record_non_finite's commit, in one thread.
void commit_non_finite(int64_t* ledger, const unsigned long long* slots, int64_t tensors, int64_t tag,
                       cudaStream_t stream);

}  // namespace dpt::ops::cuda
