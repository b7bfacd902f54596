// The lesson's LeNet, written from scratch as a list of parameters and a forward function:
//   conv 1->20 3x3 -> ReLU -> avgpool 2/2 -> conv 20->50 5x5 -> ReLU -> avgpool 2/2 ->
//   flatten (800) -> linear 800->128 -> ReLU -> linear 128->10.
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/core/tensor.h"

namespace dpt::nn {

// W1, b1, W2, b2, W3, b3, W4, b4 on `device`: weights N(0, 0.01^2), biases 0, each
// requiring grad. The same seed gives the same parameters.
std::vector<Tensor> lenet_params(uint64_t seed, Device device = {});

// Logits [N, 10] for images X [N, 1, 28, 28].
Tensor lenet(const Tensor& X, const std::vector<Tensor>& params);

}  // namespace dpt::nn
