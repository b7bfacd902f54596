// The CPU backend: oneDNN kernels for the ops in dpt/ops/ops.h. They take checked shapes
// (ops/*.cc validate and record autograd) and write freshly allocated outputs.
#pragma once

#include <cstdint>
#include <string>

#include "dpt/core/tensor.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/fused_kernels.h"

namespace dpt::ops::cpu {

using ops::BatchNormGrads;
using ops::BatchNormReluResult;
using ops::BatchNormResult;
using ops::ConvGeometry;
using ops::PoolKind;
using ops::PoolResult;

// With fuse_relu the output is relu(conv(x) + bias), the ReLU applied by the convolution
// as it writes (a oneDNN post-op) instead of in a second pass over the output.
Tensor conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvGeometry geometry,
                      const Shape& out_shape, bool fuse_relu = false);
Tensor conv2d_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape, ConvGeometry geometry);
// Fills grad_weight and (when defined) grad_bias.
void conv2d_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                             const Tensor& grad_bias, ConvGeometry geometry);

// oneDNN's names for the implementations the three passes of a convolution of these shapes
// run on under the current settings (precision, algorithm, layout), e.g.
// "jit_wino_4x3:avx512_core" for Winograd: for tests and benchmarks. (Where our own kernels
// take a shape, single_channel_conv.cc and scatter_backward_data.cc, they run instead.)
struct ConvImplementations {
  std::string forward, backward_data, backward_weights;
};
ConvImplementations conv2d_implementations(const Shape& x, const Shape& weight, const Shape& out,
                                           ConvGeometry geometry);

PoolResult pool2d_forward(const Tensor& x, PoolKind kind, int kernel, int stride, const Shape& out_shape);
Tensor pool2d_backward(const Tensor& grad_out, const PoolResult& forward, PoolKind kind, int kernel, int stride,
                       const Shape& x_shape);

// Average over each whole H x W plane: x [N, C, H, W] -> [N, C, 1, 1] (H and W may differ).
Tensor global_avg_pool2d_forward(const Tensor& x);
Tensor global_avg_pool2d_backward(const Tensor& grad_out, const Shape& x_shape);
Tensor adaptive_avg_pool2d_forward(const Tensor& x, int64_t out_h, int64_t out_w);  // plain loops
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& x_shape);

// Batch normalization over N, H, W of x; see ops::Backend. The primitive runs in the
// layout x already has, and the output keeps it.
BatchNormResult batch_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, bool use_batch_stats,
                                   const Tensor& mean, const Tensor& variance, float eps);
// Gradients for a forward that used `mean` / `variance`; with use_batch_stats they are the
// batch's own statistics (and depend on x), otherwise constants. (No gradient depends on
// beta, but oneDNN 2.6 refuses to run the backward primitive without it.)
BatchNormGrads batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   bool use_batch_stats, const Tensor& mean, const Tensor& variance, float eps);

// FusedKernels::batch_norm_relu_forward and _backward: the same primitives with oneDNN's
// fuse_norm_relu, the ReLU's mask in the primitive's workspace.
BatchNormReluResult batch_norm_relu_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                            bool use_batch_stats, const Tensor& mean, const Tensor& variance,
                                            float eps);
BatchNormGrads batch_norm_relu_backward(const Tensor& grad_out, const BatchNormReluResult& forward, const Tensor& x,
                                        const Tensor& gamma, const Tensor& beta, bool use_batch_stats, float eps);

// FusedKernels::relu_avg_pool_backward in one pass (relu_avg_pool.cc).
Tensor relu_avg_pool_backward(const Tensor& grad_pooled, const Tensor& relu_out, int pool);

// FusedKernels::crop_corner and pad_corner (crop.cc): channels-last in and out.
Tensor crop_corner(const Tensor& x, int64_t h, int64_t w);
Tensor pad_corner(const Tensor& grad, const Shape& x_shape);

// oneDNN's eltwise primitives, in the layout a kernel left the tensor in.
Tensor activation_forward(const Tensor& x, Activation a);
Tensor activation_backward(const Tensor& grad_out, const Tensor& x, Activation a);

Tensor linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias);
Tensor linear_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape);
void linear_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                             const Tensor& grad_bias);

// c = op(a) @ op(b), op transposing when asked; a, b, c row-major 2-D.
Tensor matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b);

// LeNet's conv1 (single_channel_conv.cc): a convolution of a single-channel image into at
// most 32 channels, 3 x 3 or 5 x 5, stride 1, no padding; the output is channels-last.
bool single_channel_conv_fits(const Shape& x, const Shape& weight, ConvGeometry geometry);
void single_channel_conv_forward(const float* x, const Shape& x_shape, const float* weight, const Shape& weight_shape,
                                 const float* bias, bool relu, float* out_channels_last);
// The same followed by a ReLU and an average pooling (window and step `pool`), into the
// pooled output (channels-last) only. With `relu_masks` (else null), also a 32-bit mask per
// convolution output the pooling reads (bit c: channel c > 0), [N, pooled_h * pool,
// pooled_w * pool], for the backward below.
void single_channel_conv_relu_avg_pool_forward(const float* x, const Shape& x_shape, const float* weight,
                                               const Shape& weight_shape, const float* bias, int pool,
                                               const Shape& pooled_shape, float* pooled_channels_last,
                                               uint32_t* relu_masks);
// Its weight and bias gradients (grad_bias may be null) from the pooled gradient and the
// masks: see FusedKernels::conv2d_relu_avg_pool_weight_grads.
void single_channel_conv_relu_avg_pool_weight_grads(const float* x, const Shape& x_shape, const uint32_t* relu_masks,
                                                    const float* grad_pooled_channels_last, const Shape& pooled_shape,
                                                    int pool, float* grad_weight, const Shape& weight_shape,
                                                    float* grad_bias);
// FusedKernels::conv2d_relu_avg_pool_forward and conv2d_relu_avg_pool_weight_grads, with the
// kernels above where they apply.
PoolResult conv2d_relu_avg_pool_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                        ConvGeometry geometry, int pool, const Shape& out_shape, bool for_backward);
void conv2d_relu_avg_pool_weight_grads(const Tensor& grad_pooled, const PoolResult& forward, int pool, const Tensor& x,
                                       ConvGeometry geometry, const Tensor& grad_weight, const Tensor& grad_bias);

// The backward-data pass of a convolution with few input channels (scatter_backward_data.cc):
// stride 1, no padding, a kernel row of at most 112 floats (KW x input channels), on
// AVX-512; channels-last in and out.
bool scatter_backward_data_fits(const Shape& x, const Shape& weight, ConvGeometry geometry);
void scatter_backward_data(const float* grad_out_channels_last, const Shape& grad_out_shape, const float* weight,
                           const Shape& weight_shape, const Shape& x_shape, float* grad_x_channels_last);

// Per-channel sums of a channels-last [pixels, channels] array (channel_sums.cc).
void sum_channels_last(const float* data, int64_t pixels, int64_t channels, float* sums);
// The same sums, bit for bit, of a blocked [images, ceil(channels / block), pixels, block]
// array (nChw8c, nChw16c; the padding channels are ignored).
void sum_channels_blocked(const float* data, int64_t images, int64_t pixels, int64_t channels, int64_t block,
                          float* sums);

// Plain loops (elementwise.cc, loss.cc); see ops::Backend for what each does.
void batch_norm_update_running(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                               const Tensor& variance, float momentum, double unbiased);
Tensor add(const Tensor& a, const Tensor& b);
Tensor multiply(const Tensor& a, const Tensor& b);  // plain loop, plain output
Tensor add_relu(const Tensor& a, const Tensor& b);  // FusedKernels::add_relu
void accumulate(const Tensor& into, const Tensor& from);
void pack(const std::vector<Tensor>& tensors, float* flat);
void unpack(const float* flat, const std::vector<Tensor>& tensors, float scale);
void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& velocity, const SgdStep& step);
void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const AdamStep& step);
CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor& labels, Reduction reduction,
                                         float label_smoothing);
Tensor cross_entropy_backward(const Tensor& probs, const Tensor& labels, const Tensor& grad_out, Reduction reduction,
                              float label_smoothing);
Tensor mse_forward(const Tensor& x, const Tensor& t, Reduction reduction);
Tensor mse_backward(const Tensor& x, const Tensor& t, const Tensor& grad_out, Reduction reduction);
Tensor argmax(const Tensor& x);
int64_t count_correct(const Tensor& logits, const Tensor& labels);
// The step ledger's kernels (ops/ledger.h).
void add_step_figures(const Tensor& ledger, const Tensor& loss_sum, const Tensor& logits, const Tensor& labels);
void record_non_finite(const Tensor& ledger, int64_t tag, const std::vector<Tensor>& gradients);

}  // namespace dpt::ops::cpu
