// Evaluation with BatchNorm folded into the convolutions. In eval mode a BatchNorm2d after a
// Conv2d is an affine map per channel, bn(z) = s (z - mean) + beta with s = gamma /
// sqrt(running_var + eps), so conv then bn equals one convolution with weights W s and bias
// (b - mean) s + beta: one pass over the activations less per BatchNorm (ResNet-18: 20 of
// them), and no BatchNorm kernel at all.
#pragma once

#include <memory>

#include "dpt/nn/module.h"

namespace dpt::nn {

// A deep copy of `module` in eval mode with every BatchNorm2d that directly follows a Conv2d
// (in a Sequential, and conv1/bn1, conv2/bn2 of a Residual) folded into it; `module` is
// unchanged. The copy is for evaluation only: its folded BatchNorms throw in training mode.
// It equals `module`'s evaluation up to the rounding of the folded weights (one rounding of
// W s per weight; nn_fold_test bounds the difference on ResNet-18).
std::unique_ptr<Module> fold_batch_norm(const Module& module);

}  // namespace dpt::nn
