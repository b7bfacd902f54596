// The kernels behind the ops, one implementation per kind of device. dpt/ops/*.cc check
// shapes and record autograd; they ask backend_for(tensor) for the kernels of the device
// the tensor lives on (ops/cpu: oneDNN and plain loops; ops/cuda: cuDNN, cuBLAS and our
// own CUDA kernels). Every kernel takes checked shapes, tensors on its own device, and
// writes freshly allocated outputs on that device unless it says "fills" or "in place".
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dpt/core/tensor.h"
#include "dpt/ops/update_steps.h"
#include "dpt/ops/ops.h"

namespace dpt::ops {

struct ConvGeometry {
  int stride = 1;
  int padding = 0;
};

enum class PoolKind { max, avg };
struct PoolResult {
  Tensor out;
  std::shared_ptr<void> workspace;  // what a backend keeps for backward (max pooling: where each maximum was)
  int layout = 0;                   // the CPU backend's dnnl format_tag (0: its default, blocked)
};

// Batch normalization of x [N, C, H, W] with scale gamma [C] and shift beta [C]:
//  * batch statistics (use_batch_stats): computes mean and biased variance [C] of this
//    batch, normalizes with them and returns them;
//  * given statistics: normalizes with `mean` and `variance` [C] (e.g. running stats),
//    which the result then holds.
struct BatchNormResult {
  Tensor out;
  Tensor mean;      // [C], plain
  Tensor variance;  // [C], plain, biased (divided by N*H*W)
};
struct BatchNormGrads {
  Tensor grad_x, grad_gamma, grad_beta;
};

class FusedKernels;  // fused_kernels.h

struct CrossEntropyResult {
  Tensor loss;   // [N] per example for Reduction::none, else [1]
  Tensor probs;  // [N, K] softmax probabilities, kept for backward
};

// The reference set of ops. Kernels that fuse several of them live in the optional layer
// of fused_kernels.h, which a backend offers through fused().
class Backend {
 public:
  virtual ~Backend() = default;

  // This backend's fused kernels, or null where it has none (the ops then compose).
  virtual const FusedKernels* fused() const { return nullptr; }

  // With fuse_relu the output is relu(conv(x) + bias), in one pass over the output.
  virtual Tensor conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvGeometry geometry,
                                const Shape& out_shape, bool fuse_relu) const = 0;
  virtual Tensor conv2d_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape,
                                      ConvGeometry geometry) const = 0;
  // Fills grad_weight and (when defined) grad_bias.
  virtual void conv2d_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                                       const Tensor& grad_bias, ConvGeometry geometry) const = 0;

  virtual PoolResult pool2d_forward(const Tensor& x, PoolKind kind, int kernel, int stride,
                                    const Shape& out_shape) const = 0;
  virtual Tensor pool2d_backward(const Tensor& grad_out, const PoolResult& forward, PoolKind kind, int kernel,
                                 int stride, const Shape& x_shape) const = 0;
  // Mean over each whole H x W plane: [N, C, H, W] -> [N, C, 1, 1].
  virtual Tensor global_avg_pool2d_forward(const Tensor& x) const = 0;
  virtual Tensor global_avg_pool2d_backward(const Tensor& grad_out, const Shape& x_shape) const = 0;
  // x [N, C, H, W] -> [N, C, OH, OW]: output (i, j) is the mean of rows
  // [floor(i H / OH), ceil((i + 1) H / OH)) and the same columns of W (torch's bins).
  virtual Tensor adaptive_avg_pool2d_forward(const Tensor& x, int64_t out_h, int64_t out_w) const = 0;
  virtual Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& x_shape) const = 0;

  virtual BatchNormResult batch_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                             bool use_batch_stats, const Tensor& mean, const Tensor& variance,
                                             float eps) const = 0;
  // Gradients for a forward that used `mean` / `variance`; with use_batch_stats they are the
  // batch's own statistics (and depend on x), otherwise constants.
  virtual BatchNormGrads batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma,
                                             const Tensor& beta, bool use_batch_stats, const Tensor& mean,
                                             const Tensor& variance, float eps) const = 0;
  // In place: running = (1 - momentum) * running + momentum * stat, the variance scaled by
  // `unbiased` (n / (n - 1)) first, as torch.nn.BatchNorm2d.
  virtual void batch_norm_update_running(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                                         const Tensor& variance, float momentum, double unbiased) const = 0;

  // y = a(x) (ops/activation.h), and grad_out * a'(x) from the forward's input x; for relu
  // x may also be its output (the same mask).
  virtual Tensor activation_forward(const Tensor& x, Activation a) const = 0;
  virtual Tensor activation_backward(const Tensor& grad_out, const Tensor& x, Activation a) const = 0;
  Tensor relu_forward(const Tensor& x) const { return activation_forward(x, Activation::relu); }
  Tensor relu_backward(const Tensor& grad_out, const Tensor& x) const {
    return activation_backward(grad_out, x, Activation::relu);
  }

  // y = x W^T + b.
  virtual Tensor linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias) const = 0;
  virtual Tensor linear_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape) const = 0;
  virtual void linear_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                                       const Tensor& grad_bias) const = 0;
  // c = op(a) @ op(b), op transposing when asked; a, b, c row-major 2-D.
  virtual Tensor matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b) const = 0;

  virtual Tensor add(const Tensor& a, const Tensor& b) const = 0;
  // Elementwise a * b (same shape).
  virtual Tensor multiply(const Tensor& a, const Tensor& b) const = 0;
  // In place: into += from (same numel).
  virtual void accumulate(const Tensor& into, const Tensor& from) const = 0;

  // Softmax cross-entropy of logits [N, K] against labels [N] smoothed by s in [0, 1): the
  // target of row i is (1 - s) onehot(y_i) + s / K, its loss -sum_j target_j log p_ij; a
  // label outside [0, K) throws std::invalid_argument naming it and its index.
  virtual CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor& labels, Reduction reduction,
                                                   float label_smoothing) const = 0;
  // d loss / d logits = (probs - target) * the upstream gradient (per example for none,
  // grad_out[0] for sum, grad_out[0] / N for mean).
  virtual Tensor cross_entropy_backward(const Tensor& probs, const Tensor& labels, const Tensor& grad_out,
                                        Reduction reduction, float label_smoothing) const = 0;
  // Squared error of x [N, K] against targets t [N, K], per example the mean over its K
  // values: [N] for none, their sum or mean [1] otherwise (torch's MSELoss for mean).
  virtual Tensor mse_forward(const Tensor& x, const Tensor& t, Reduction reduction) const = 0;
  // d loss / d x = 2 (x - t) / K * the upstream gradient, scaled as cross_entropy_backward.
  virtual Tensor mse_backward(const Tensor& x, const Tensor& t, const Tensor& grad_out, Reduction reduction) const = 0;
  virtual Tensor argmax(const Tensor& x) const = 0;  // [N, K] -> int64 [N]
  virtual int64_t count_correct(const Tensor& logits, const Tensor& labels) const = 0;

  // The step ledger's kernels (ops/ledger.h, which states their contracts): add to it in
  // place, on its device, without waiting for the device.
  virtual void add_step_figures(const Tensor& ledger, const Tensor& loss_sum, const Tensor& logits,
                                const Tensor& labels) const = 0;
  virtual void record_non_finite(const Tensor& ledger, int64_t tag, const std::vector<Tensor>& gradients) const = 0;

  // The tensors one after another in one flat buffer of their total size, and back: what a
  // collective sends, so that a whole model costs one allreduce. `flat` is memory of this
  // backend's device (host memory for the CPU). unpack writes flat * scale.
  virtual void pack(const std::vector<Tensor>& tensors, float* flat) const = 0;
  virtual void unpack(const float* flat, const std::vector<Tensor>& tensors, float scale) const = 0;

  // In place, one SGD step on one parameter: d = grad + decay * param; with a defined
  // velocity v = first ? d : momentum * v + d and d = nesterov ? d + momentum * v : v;
  // then param -= lr * d.
  virtual void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& velocity, const SgdStep& step) const = 0;
  // In place, one Adam step on one parameter (optim/optimizer.h gives the rule); exp_avg
  // and exp_avg_sq are zero before the first.
  virtual void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                           const AdamStep& step) const = 0;
};

const Backend& cpu_backend();
// The CUDA backend; throws std::runtime_error when this build has no CUDA.
const Backend& cuda_backend();
const Backend& backend_for(Device device);
inline const Backend& backend_for(const Tensor& t) { return backend_for(t.device()); }

}  // namespace dpt::ops
