// The fusion pass: which layers of a network run as one fused op. Sequential and Residual
// run their layers through it; it matches
//   Conv2d, ReLU, AvgPool2d (window == step)   -> ops::conv2d_relu_avg_pool2d
//   Conv2d, BatchNorm2d, ReLU                  -> the convolution, then ops::batch_norm_relu2d
//                                                 (after folding: ops::conv2d_relu)
//   Conv2d, ReLU                               -> ops::conv2d_relu
//   BatchNorm2d, ReLU                          -> ops::batch_norm_relu2d
//   BatchNorm2d, add, ReLU (a residual tail)   -> the BatchNorm, then ops::add_relu
// in any network, whatever it is named. Each fused op has the values of the layers it
// replaces (ops.h states how closely), and runs the backend's fused kernel where it has one
// (ops/fused_kernels.h), composing the reference ops where not. A synchronized BatchNorm
// is left unfused.
#pragma once

#include <vector>

#include "dpt/core/tensor.h"

namespace dpt::nn {

class Module;
class Conv2d;
class BatchNorm2d;

// Whether the pass fuses: this thread's ops::ExecutionOptions::fusion (on by default; off,
// every layer runs as its own op, the reference tests/nn_fusion_test.cc compares with).
bool layer_fusion_enabled();

// Runs `layers` in order on x, fused where the pass matches.
Tensor run_layers(const std::vector<Module*>& layers, const Tensor& x);

// relu(bn(conv(x))) as the pass runs it.
Tensor conv_bn_relu(Conv2d& conv, BatchNorm2d& bn, const Tensor& x);
// relu(bn(z) + shortcut) as the pass runs it.
Tensor bn_add_relu(BatchNorm2d& bn, const Tensor& z, const Tensor& shortcut);

}  // namespace dpt::nn
