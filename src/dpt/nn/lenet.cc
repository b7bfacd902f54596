#include "dpt/nn/lenet.h"

#include <stdexcept>

#include "dpt/core/random.h"
#include "dpt/nn/models.h"
#include "dpt/ops/ops.h"

namespace dpt::nn {

std::vector<Tensor> lenet_params(uint64_t seed, const ImageShape& input, int64_t num_classes, Device device) {
  check_input("LeNet", input, kLenetMinSide, num_classes);
  constexpr float kScale = 0.01f;  // the lesson's init
  Rng rng(seed);
  const Device host = device.kind == Device::Kind::cuda ? Device::cpu() : device;  // weights are drawn on the host
  const auto weight = [&](const Shape& shape, const char* name) {
    Tensor w = Tensor::empty(shape, DType::f32, host);
    fill_normal(w, 0.0f, kScale, rng);
    return w.to(device).set_requires_grad(true).set_name(name);
  };
  const auto bias = [&](int64_t size, const char* name) {
    return Tensor::zeros({size}, DType::f32, device).set_requires_grad(true).set_name(name);
  };
  return {weight({20, input.channels, 3, 3}, "W1"),
          bias(20, "b1"),
          weight({50, 20, 5, 5}, "W2"),
          bias(50, "b2"),
          weight({128, lenet_flat_features(input)}, "W3"),
          bias(128, "b3"),
          weight({num_classes, 128}, "W4"),
          bias(num_classes, "b4")};
}

Tensor lenet(const Tensor& X, const std::vector<Tensor>& params) {
  if (params.size() != 8) {
    throw std::invalid_argument("lenet: expected 8 parameters (W1, b1, ..., W4, b4), got " +
                                std::to_string(params.size()));
  }
  // avg_pool(relu(conv(...))) as one op: the ReLU fused into the convolution, and its
  // backward and the pooling's in one pass: the same values and gradients, two passes less.
  Tensor h1 = ops::conv2d_relu_avg_pool2d(X, params[0], params[1], 2);
  Tensor h2 = ops::conv2d_relu_avg_pool2d(h1, params[2], params[3], 2);
  Tensor h3 = ops::relu(ops::linear(ops::flatten(h2), params[4], params[5]));
  return ops::linear(h3, params[6], params[7]);
}

}  // namespace dpt::nn
