// The lesson's LeNet, written from scratch as a list of parameters and a forward function:
//   conv C->20 3x3 -> ReLU -> avgpool 2/2 -> conv 20->50 5x5 -> ReLU -> avgpool 2/2 ->
//   flatten (F) -> linear F->128 -> ReLU -> linear 128->classes,
// where C is the images' channels and F follows from their size (800 for 28x28).
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/core/image_shape.h"
#include "dpt/core/tensor.h"

namespace dpt::nn {

// W1, b1, W2, b2, W3, b3, W4, b4 on `device` for images of `input` and `num_classes`
// classes: weights N(0, 0.01^2), biases 0, each requiring grad. The same seed gives the
// same parameters. Throws ConfigError for images LeNet cannot take (nn/models.h).
std::vector<Tensor> lenet_params(uint64_t seed, const ImageShape& input, int64_t num_classes, Device device = {});

// Logits [N, classes] for images X [N, C, H, W].
Tensor lenet(const Tensor& X, const std::vector<Tensor>& params);

}  // namespace dpt::nn
