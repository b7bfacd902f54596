// The lesson's networks as modules.
#pragma once

#include <cstdint>
#include <memory>

#include "dpt/nn/layers.h"

namespace dpt::nn {

// LeNet as in the from-scratch lesson (lenet.h), as a Sequential:
// conv 1->20 3x3, ReLU, avgpool 2/2, conv 20->50 5x5, ReLU, avgpool 2/2, flatten,
// linear 800->128, ReLU, linear 128->10.
std::unique_ptr<Sequential> lenet_module();

// The concise lesson's ResNet-18 for small images: 3x3 conv 64 stride 1 + BatchNorm +
// ReLU (no max-pool), four stages of two residual blocks (64, 128, 256, 512 channels;
// a 1x1 projection with stride 2 at each stage change), global average pool, linear.
std::unique_ptr<Sequential> resnet18(int64_t num_classes = 10, int64_t in_channels = 1);

}  // namespace dpt::nn
