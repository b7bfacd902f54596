// The layers of the concise API. Each keeps its configuration as plain members and its
// tensors in Module, so Module's deep copy clones it correctly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dpt/nn/module.h"

namespace dpt::nn {

// Weights start N(0, 0.01^2) as in the lesson (see init.h for the alternatives); biases 0.
class BatchNorm2d;

class Conv2d : public Cloneable<Conv2d> {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int kernel, int stride = 1, int padding = 0, bool bias = true);
  Tensor forward(const Tensor& x) override;
  // relu(forward(x)) and avg_pool2d(relu(forward(x)), pool, pool) as one op each (the
  // fusion pass, nn/fusion.h, runs such layers so).
  Tensor forward_relu(const Tensor& x);
  Tensor forward_relu_avg_pool(const Tensor& x, int pool);
  int stride() const { return stride_; }
  int padding() const { return padding_; }
  bool has_bias() const { return has_bias_; }
  // Folds `bn`, which follows this convolution, into its weights and bias (adding a bias if
  // it has none): conv'(x) = bn(conv(x)) with bn's running statistics. Then bn.set_folded().
  void fold(BatchNorm2d& bn);

 private:
  int stride_, padding_;
  bool has_bias_;
};

class Linear : public Cloneable<Linear> {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;
  bool has_bias() const { return has_bias_; }

 private:
  bool has_bias_;
};

// Normalizes each channel with the statistics of the batch this replica sees while
// training, and with the running statistics in eval mode (PyTorch's semantics).
class BatchNorm2d : public Cloneable<BatchNorm2d> {
 public:
  explicit BatchNorm2d(int64_t channels, float momentum = 0.1f, float eps = 1e-5f);
  Tensor forward(const Tensor& x) override;
  // relu(forward(x)), as one op where the BatchNorm is neither folded nor synchronized.
  Tensor forward_relu(const Tensor& x);
  float eps() const { return eps_; }
  void synchronize_batch_norm(std::shared_ptr<const ops::ReplicaSum> sum) override { sync_ = std::move(sum); }
  // Folded into the convolution before it (Conv2d::fold): the identity, in eval mode only
  // (a folded BatchNorm in training mode throws std::logic_error).
  void set_folded() { folded_ = true; }
  bool folded() const { return folded_; }

 private:
  float momentum_, eps_;
  std::shared_ptr<const ops::ReplicaSum> sync_;  // set: the global batch's statistics in training
  bool folded_ = false;
};

// An elementwise activation (ops/activation.h) as a layer; ReLU, Sigmoid, Tanh and GELU
// are it.
template <ops::Activation A>
class ActivationLayer : public Cloneable<ActivationLayer<A>> {
 public:
  Tensor forward(const Tensor& x) override { return ops::activation(x, A); }
};
using ReLU = ActivationLayer<ops::Activation::relu>;
using Sigmoid = ActivationLayer<ops::Activation::sigmoid>;
using Tanh = ActivationLayer<ops::Activation::tanh>;
using GELU = ActivationLayer<ops::Activation::gelu>;

class AvgPool2d : public Cloneable<AvgPool2d> {
 public:
  AvgPool2d(int kernel, int stride) : kernel_(kernel), stride_(stride) {}
  Tensor forward(const Tensor& x) override;
  int kernel() const { return kernel_; }
  int stride() const { return stride_; }

 private:
  int kernel_, stride_;
};

class MaxPool2d : public Cloneable<MaxPool2d> {
 public:
  MaxPool2d(int kernel, int stride) : kernel_(kernel), stride_(stride) {}
  Tensor forward(const Tensor& x) override;
  int kernel() const { return kernel_; }
  int stride() const { return stride_; }

 private:
  int kernel_, stride_;
};

// In training, zeroes each value with probability p and scales the others by 1 / (1 - p)
// (torch.nn.Dropout); the identity in eval mode. The mask is a pure function of (seed,
// step, the example's row in the global batch, the value's index within the example), the
// step and row coming from the replica engine (StepContext): so the same examples get the
// same masks on any device or process count, and --deterministic keeps its bits; a resumed
// run draws the uninterrupted run's masks. Give each Dropout of a network its own seed.
// Outside the engine (no step set) each training call is a step of its own, counted by
// this layer.
class Dropout : public Cloneable<Dropout> {
 public:
  // Throws std::invalid_argument unless 0 <= p < 1.
  explicit Dropout(float p = 0.5f, uint64_t seed = 0);
  Tensor forward(const Tensor& x) override;
  float p() const { return p_; }
  uint64_t seed() const { return seed_; }
  // The mask forward multiplies by, on the host: 0 or 1 / (1 - p) for each value of `n`
  // examples of `per_example` values, the first at row `first_row` of step `step`'s batch.
  Tensor mask(int64_t step, int64_t first_row, int64_t n, int64_t per_example) const;

 private:
  float p_;
  uint64_t seed_;
  int64_t calls_ = 0;  // training forwards without a step set
};

// [N, C, H, W] -> [N, C, 1, 1]: the mean over each channel.
class GlobalAvgPool2d : public Cloneable<GlobalAvgPool2d> {
 public:
  Tensor forward(const Tensor& x) override;
};

// [N, C, H, W] -> [N, C, out_h, out_w] whatever H and W (torch.nn.AdaptiveAvgPool2d):
// ops::adaptive_avg_pool2d; 1 x 1 is GlobalAvgPool2d's mean.
class AdaptiveAvgPool2d : public Cloneable<AdaptiveAvgPool2d> {
 public:
  AdaptiveAvgPool2d(int64_t out_h, int64_t out_w) : out_h_(out_h), out_w_(out_w) {}
  explicit AdaptiveAvgPool2d(int64_t out) : AdaptiveAvgPool2d(out, out) {}
  Tensor forward(const Tensor& x) override { return ops::adaptive_avg_pool2d(x, out_h_, out_w_); }
  int64_t out_h() const { return out_h_; }
  int64_t out_w() const { return out_w_; }

 private:
  int64_t out_h_, out_w_;
};

class Flatten : public Cloneable<Flatten> {
 public:
  Tensor forward(const Tensor& x) override;
};

class Sequential : public Cloneable<Sequential> {
 public:
  Sequential() = default;
  Sequential& add(std::string name, std::unique_ptr<Module> layer);
  template <class Layer, class... Args>
  Sequential& add(std::string name, Args&&... args) {
    return add(std::move(name), std::make_unique<Layer>(std::forward<Args>(args)...));
  }
  // Runs the layers in order, fused where the fusion pass matches (nn/fusion.h).
  Tensor forward(const Tensor& x) override;
  void fold_batch_norms() override;
};

// The ResNet residual block: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), where
// the shortcut is x itself, or a 1x1 convolution when the shape changes. Its conv1, bn1,
// ReLU and its tail (bn2, add, ReLU) run through the fusion pass.
class Residual : public Cloneable<Residual> {
 public:
  Residual(int64_t in_channels, int64_t out_channels, bool use_1x1conv = false, int stride = 1);
  Tensor forward(const Tensor& x) override;
  bool use_1x1conv() const { return use_1x1conv_; }
  void fold_batch_norms() override;

 private:
  bool use_1x1conv_;
};

}  // namespace dpt::nn
