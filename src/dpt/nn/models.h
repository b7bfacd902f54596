// The lesson's networks as modules.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dpt/core/image_shape.h"
#include "dpt/nn/layers.h"

namespace dpt::nn {

// The smallest image side each model takes: LeNet's two 2x2 pools after a 3x3 and a 5x5
// convolution leave nothing below 14; ResNet-18 halves the side three times.
inline constexpr int64_t kLenetMinSide = 14;
inline constexpr int64_t kResnetMinSide = 8;

// Throws ConfigError unless `model` can take images of `input` and tell `num_classes` apart.
void check_input(const std::string& model, const ImageShape& input, int64_t min_side, int64_t num_classes);
// LeNet's flattened features before its first linear layer: 800 for 28x28.
int64_t lenet_flat_features(const ImageShape& input);

// LeNet as in the from-scratch lesson (lenet.h), as a Sequential, for images of `input`
// and `num_classes` classes: conv C->20 3x3, ReLU, avgpool 2/2, conv 20->50 5x5, ReLU,
// avgpool 2/2, flatten, linear F->128, ReLU, linear 128->classes, where F follows from
// the image size (800 for 28x28). Throws ConfigError for images under kLenetMinSide.
std::unique_ptr<Sequential> lenet_module(const ImageShape& input, int64_t num_classes);

// The concise lesson's ResNet-18 for small images: 3x3 conv 64 stride 1 + BatchNorm +
// ReLU (no max-pool), four stages of two residual blocks (64, 128, 256, 512 channels;
// a 1x1 projection with stride 2 at each stage change), global average pool, linear.
// Any image of kResnetMinSide or more. Throws ConfigError for smaller images.
std::unique_ptr<Sequential> resnet18(const ImageShape& input, int64_t num_classes);

}  // namespace dpt::nn
