// Functional ops with forward and backward. Each op computes its forward on the device of
// its inputs and, when any input needs a gradient and grad mode is on, records a backward
// node (dpt/autograd/node.h). Shapes follow PyTorch: images are NCHW, conv weights
// OIHW, linear weights [out_features, in_features]. Shape errors throw
// std::invalid_argument naming the op and both shapes.
#pragma once

#include <functional>

#include <cstdint>

#include "dpt/core/tensor.h"
#include "dpt/ops/activation.h"

namespace dpt::ops {

// x [N, C, H, W], weight [O, C, KH, KW], bias [O] or undefined -> [N, O, OH, OW].
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride = 1, int padding = 0);
// relu(conv2d(...)) in one kernel (the ReLU fused into the convolution's output), with the
// same values and gradients as the two ops, bit for bit, and one pass less over memory.
Tensor conv2d_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride = 1, int padding = 0);
// avg_pool2d(conv2d_relu(...), pool, pool): LeNet's block. The same values and gradients as
// the two ops, bit for bit, but for a first layer's (input needing no gradient) weight and
// bias gradients where the backend's one kernel computes them: the same products, added in
// another order. Backward spreads the pooled gradient and applies the ReLU's mask in one
// pass instead of two. Where the pooling drops the convolution's last rows or
// columns and there is no padding, only the outputs it keeps are computed.
Tensor conv2d_relu_avg_pool2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int pool, int stride = 1,
                              int padding = 0);

// Window `kernel` x `kernel`, step `stride`, no padding; avg divides by kernel*kernel.
Tensor avg_pool2d(const Tensor& x, int kernel, int stride);
Tensor max_pool2d(const Tensor& x, int kernel, int stride);

// Mean over each whole H x W plane: x [N, C, H, W] -> [N, C, 1, 1] (H and W may differ).
Tensor global_avg_pool2d(const Tensor& x);
// x [N, C, H, W] -> [N, C, out_h, out_w], each output the mean of its bin of rows and
// columns (torch.nn.functional.adaptive_avg_pool2d's bins, ops/adaptive_bins.h), whatever
// H and W: the head a network needs to take pictures of any size. 1 x 1 is global_avg_pool2d.
Tensor adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w);

// An elementwise activation (ops/activation.h), differentiable; the four below are it.
Tensor activation(const Tensor& x, Activation a);
inline Tensor relu(const Tensor& x) { return activation(x, Activation::relu); }
inline Tensor sigmoid(const Tensor& x) { return activation(x, Activation::sigmoid); }
inline Tensor tanh(const Tensor& x) { return activation(x, Activation::tanh); }
inline Tensor gelu(const Tensor& x) { return activation(x, Activation::gelu); }

// Batch normalization of x [N, C, H, W] per channel, as torch.nn.functional.batch_norm:
// y = gamma * (x - mean) / sqrt(var + eps) + beta, gamma / beta / running stats [C].
// training: mean and biased var of this batch (over N, H, W); updates the running stats
//   in place: running = (1 - momentum) * running + momentum * stat, with the unbiased
//   batch variance (times n / (n - 1), n = N*H*W) for running_var; needs n > 1.
// eval: mean = running_mean, var = running_var (left unchanged).
// Differentiable w.r.t. x, gamma and beta in both modes; the running stats get no gradient.
Tensor batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean, Tensor& running_var,
                    bool training, float momentum = 0.1f, float eps = 1e-5f);

// relu(batch_norm2d(...)) with the same values and gradients, bit for bit where the backend
// fuses them (FusedKernels::batch_norm_relu_forward: one pass each way, and backward keeps
// a mask instead of the normalized tensor); composed where it does not.
Tensor batch_norm_relu2d(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                         Tensor& running_var, bool training, float momentum = 0.1f, float eps = 1e-5f);

// Sums over every replica of a data-parallel model, for synchronized BatchNorm: each replica
// calls them with its own values, at the same point of its forward or backward, and gets
// the sums over all replicas in place (an allreduce; parallel::DataParallel provides it).
struct ReplicaSum {
  std::function<void(float* values, size_t n)> floats;
  std::function<void(int64_t* values, size_t n)> ints;
};

// batch_norm2d in training mode with the statistics of the global batch: each replica
// holds a shard x of it, the per-channel sums, sums of squares and counts are summed over
// the replicas (`sum`), every replica normalizes with the global mean and biased variance
// and updates its running stats with them (the unbiased variance of the global count);
// backward sums the per-channel sums of dy and dy * x_hat over the replicas, so that the
// gradient of x is that of one device holding the whole batch. gamma and beta get this
// shard's part of their gradient (the gradient allreduce adds the rest). CPU tensors.
Tensor sync_batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                         Tensor& running_var, const ReplicaSum& sum, float momentum = 0.1f, float eps = 1e-5f);

// x [N, in], weight [out, in], bias [out] or undefined -> [N, out]  (y = x W^T + b).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// a [M, K] @ b [K, N] -> [M, N].
Tensor matmul(const Tensor& a, const Tensor& b);

// Elementwise sum of two tensors of the same shape.
Tensor add(const Tensor& a, const Tensor& b);
// Elementwise product of two tensors of the same shape (Dropout's mask), differentiable in both.
Tensor mul(const Tensor& a, const Tensor& b);
// relu(add(a, b)): a residual block's tail, in one pass where the backend fuses it.
Tensor add_relu(const Tensor& a, const Tensor& b);

// Same data, new shape; one dimension may be -1 (inferred). Shares storage with x.
Tensor reshape(const Tensor& x, const Shape& shape);
// [N, ...] -> [N, prod(...)].
Tensor flatten(const Tensor& x);

enum class Reduction { none, sum, mean };
// Softmax cross-entropy of logits [N, K] against int64 labels [N] in [0, K).
// none -> [N] per-example losses; sum / mean -> [1]. On the CPU a label outside [0, K)
// throws (check_labels); on a GPU labels are not checked, since reading a flag back would
// wait for the GPU at every step: callers check them on the host, where the batch is cut
// (parallel::shard_loss_sum). An out-of-range label there adds 0 to the loss, never reads
// outside the row.
// label_smoothing s in [0, 1) (torch's label_smoothing): each row's target is
// (1 - s) onehot(label) + s / K instead of onehot(label).
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, Reduction reduction = Reduction::mean,
                     float label_smoothing = 0.0f);
// Mean squared error of x [N, ...] against targets of the same shape, per example the mean
// over its values: none -> [N]; mean -> [1], torch.nn.functional.mse_loss; sum -> [1].
// Differentiable w.r.t. x (the targets get no gradient).
Tensor mse_loss(const Tensor& x, const Tensor& targets, Reduction reduction = Reduction::mean);
// Throws std::invalid_argument "cross_entropy: label L at index I is outside [0, K)" for
// the first of `labels` (int64 [N] on the host) outside [0, classes).
void check_labels(const Tensor& labels, int64_t classes);

// Index of the largest value along the last axis of x [N, K] -> int64 [N] (no gradient).
Tensor argmax(const Tensor& x);
// How many rows of logits [N, K] have their argmax equal to the label.
int64_t count_correct(const Tensor& logits, const Tensor& labels);

}  // namespace dpt::ops
