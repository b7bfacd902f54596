#include "dpt/nn/layers.h"

#include <cmath>
#include <stdexcept>

#include "dpt/core/random.h"
#include "dpt/nn/fusion.h"
#include "dpt/ops/ops.h"

namespace dpt::nn {

namespace {
Tensor lesson_weight(const Shape& shape) {
  // The lesson's N(0, 0.01^2); init_weights() re-initializes with another scheme or seed.
  static thread_local Rng rng(0);
  Tensor w = Tensor::empty(shape);
  fill_normal(w, 0.0f, 0.01f, rng);
  return w;
}
}  // namespace

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int kernel, int stride, int padding, bool bias)
    : stride_(stride), padding_(padding), has_bias_(bias) {
  register_parameter("weight", lesson_weight({out_channels, in_channels, kernel, kernel}));
  if (bias) register_parameter("bias", Tensor::zeros({out_channels}));
}

Tensor Conv2d::forward(const Tensor& x) {
  return ops::conv2d(x, param(0), has_bias_ ? param(1) : Tensor(), stride_, padding_);
}

Tensor Conv2d::forward_relu(const Tensor& x) {
  return ops::conv2d_relu(x, param(0), has_bias_ ? param(1) : Tensor(), stride_, padding_);
}

Tensor Conv2d::forward_relu_avg_pool(const Tensor& x, int pool) {
  return ops::conv2d_relu_avg_pool2d(x, param(0), has_bias_ ? param(1) : Tensor(), pool, stride_, padding_);
}

void Conv2d::fold(BatchNorm2d& bn) {
  if (bn.folded()) throw std::logic_error("Conv2d::fold: that BatchNorm2d is folded already");
  const std::vector<Tensor> bn_params = bn.parameters(), bn_buffers = bn.buffers();
  const Tensor weight = param(0);  // a handle: registering a bias below may move param(0)
  const int64_t out_channels = weight.dim(0), per_channel = weight.numel() / out_channels;
  if (bn_params[0].numel() != out_channels)
    throw std::invalid_argument("Conv2d::fold: the BatchNorm2d has another channel count");
  if (!has_bias_) {
    register_parameter("bias", Tensor::zeros({out_channels}));
    has_bias_ = true;
  }
  // Read host copies and write back (a module on a GPU folds as well; the fold runs once).
  std::vector<float> w = weight.to_vector(), b = param(1).to_vector();
  const std::vector<float> gamma = bn_params[0].to_vector(), beta = bn_params[1].to_vector();
  const std::vector<float> mean = bn_buffers[0].to_vector(), var = bn_buffers[1].to_vector();
  for (int64_t o = 0; o < out_channels; ++o) {
    const size_t c = static_cast<size_t>(o);
    // bn(z) = gamma (z - mean) / sqrt(var + eps) + beta, in double, rounded once.
    const double scale = static_cast<double>(gamma[c]) / std::sqrt(static_cast<double>(var[c]) + bn.eps());
    for (int64_t k = 0; k < per_channel; ++k) {
      float& v = w[static_cast<size_t>(o * per_channel + k)];
      v = static_cast<float>(static_cast<double>(v) * scale);
    }
    b[c] = static_cast<float>((static_cast<double>(b[c]) - mean[c]) * scale + beta[c]);
  }
  weight.copy_from(Tensor::from_vector(w, weight.shape()));
  param(1).copy_from(Tensor::from_vector(b, {out_channels}));
  bn.set_folded();
}

Linear::Linear(int64_t in_features, int64_t out_features, bool bias) : has_bias_(bias) {
  register_parameter("weight", lesson_weight({out_features, in_features}));
  if (bias) register_parameter("bias", Tensor::zeros({out_features}));
}

Tensor Linear::forward(const Tensor& x) { return ops::linear(x, param(0), has_bias_ ? param(1) : Tensor()); }

BatchNorm2d::BatchNorm2d(int64_t channels, float momentum, float eps) : momentum_(momentum), eps_(eps) {
  register_parameter("weight", Tensor::full({channels}, 1.0f));
  register_parameter("bias", Tensor::zeros({channels}));
  register_buffer("running_mean", Tensor::zeros({channels}));
  register_buffer("running_var", Tensor::full({channels}, 1.0f));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  if (folded_) {
    if (is_training()) throw std::logic_error("a BatchNorm2d folded into its convolution is for evaluation only");
    return x;
  }
  if (sync_ && is_training()) return ops::sync_batch_norm2d(x, param(0), param(1), buffer(0), buffer(1), *sync_, momentum_, eps_);
  return ops::batch_norm2d(x, param(0), param(1), buffer(0), buffer(1), is_training(), momentum_, eps_);
}

Tensor BatchNorm2d::forward_relu(const Tensor& x) {
  if (folded_ || (sync_ && is_training())) return ops::relu(forward(x));
  return ops::batch_norm_relu2d(x, param(0), param(1), buffer(0), buffer(1), is_training(), momentum_, eps_);
}

Tensor AvgPool2d::forward(const Tensor& x) { return ops::avg_pool2d(x, kernel_, stride_); }
Tensor MaxPool2d::forward(const Tensor& x) { return ops::max_pool2d(x, kernel_, stride_); }
Tensor GlobalAvgPool2d::forward(const Tensor& x) { return ops::global_avg_pool2d(x); }
Tensor Flatten::forward(const Tensor& x) { return ops::flatten(x); }

Sequential& Sequential::add(std::string name, std::unique_ptr<Module> layer) {
  register_module(std::move(name), std::move(layer));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  std::vector<Module*> layers;
  for (size_t i = 0; i < num_children(); ++i) layers.push_back(&child(i));
  return run_layers(layers, x);
}

void Sequential::fold_batch_norms() {
  for (size_t i = 0; i + 1 < num_children(); ++i) {
    auto* conv = dynamic_cast<Conv2d*>(&child(i));
    auto* bn = dynamic_cast<BatchNorm2d*>(&child(i + 1));
    if (conv && bn && !bn->folded()) conv->fold(*bn);
  }
  Module::fold_batch_norms();
}

Residual::Residual(int64_t in_channels, int64_t out_channels, bool use_1x1conv, int stride)
    : use_1x1conv_(use_1x1conv) {
  register_module("conv1", std::make_unique<Conv2d>(in_channels, out_channels, 3, stride, 1));
  register_module("bn1", std::make_unique<BatchNorm2d>(out_channels));
  register_module("conv2", std::make_unique<Conv2d>(out_channels, out_channels, 3, 1, 1));
  register_module("bn2", std::make_unique<BatchNorm2d>(out_channels));
  if (use_1x1conv) register_module("conv3", std::make_unique<Conv2d>(in_channels, out_channels, 1, stride, 0));
}

Tensor Residual::forward(const Tensor& x) {
  auto& bn2 = dynamic_cast<BatchNorm2d&>(child(3));
  const Tensor y = conv_bn_relu(dynamic_cast<Conv2d&>(child(0)), dynamic_cast<BatchNorm2d&>(child(1)), x);
  const Tensor z = child(2).forward(y);
  const Tensor shortcut = use_1x1conv_ ? child(4).forward(x) : x;
  // A folded bn2 is the identity (bn_add_relu runs it as such).
  return bn_add_relu(bn2, z, shortcut);
}

void Residual::fold_batch_norms() {
  for (size_t i : {0, 2}) {
    auto& bn = dynamic_cast<BatchNorm2d&>(child(i + 1));
    if (!bn.folded()) dynamic_cast<Conv2d&>(child(i)).fold(bn);
  }
  Module::fold_batch_norms();
}

Dropout::Dropout(float p, uint64_t seed) : p_(p), seed_(seed) {
  if (!(p >= 0.0f && p < 1.0f)) {
    throw std::invalid_argument("Dropout: p must be in [0, 1), got " + std::to_string(p) +
                                " (the probability of zeroing a value; 0.5 is usual)");
  }
}

Tensor Dropout::mask(int64_t step, int64_t first_row, int64_t n, int64_t per_example) const {
  Tensor mask = Tensor::empty({n, per_example}, DType::f32, Device::cpu());
  float* m = mask.data<float>();
  const float kept = 1.0f / (1.0f - p_);
  // 24 bits per draw: a float compare as torch's bernoulli makes, and exact for every p.
  const uint32_t threshold = static_cast<uint32_t>(static_cast<double>(p_) * (1u << 24));
  const uint64_t step_key = mix64(mix64(seed_) ^ static_cast<uint64_t>(step));
  for (int64_t r = 0; r < n; ++r) {
    const uint64_t example_key = mix64(step_key ^ static_cast<uint64_t>(first_row + r));
    for (int64_t j = 0; j < per_example; ++j) {
      const uint32_t draw = static_cast<uint32_t>(mix64(example_key ^ static_cast<uint64_t>(j)) >> 40);
      m[r * per_example + j] = draw < threshold ? 0.0f : kept;
    }
  }
  return mask;
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0.0f) return x;
  if (x.ndim() < 1 || x.dim(0) == 0) return x;
  const StepContext& context = step_context();
  const int64_t step = context.step >= 0 ? context.step : calls_++;
  const int64_t n = x.dim(0);
  const Tensor m = mask(step, context.step >= 0 ? context.first_row : 0, n, x.numel() / n);
  return ops::mul(x, ops::reshape(m, x.shape()).to(x.device()));
}

}  // namespace dpt::nn
