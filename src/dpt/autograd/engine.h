// Reverse-mode differentiation over the graph that the ops recorded.
#pragma once

#include "dpt/core/tensor.h"

namespace dpt::autograd {

// Seeds d(root)/d(root) = 1, walks the recorded ops from root back to the leaves in reverse
// topological order, and adds each leaf's gradient into its .grad(): gradients accumulate
// across calls until zero_grad(), as in PyTorch.
void backward(const Tensor& root);

}  // namespace dpt::autograd
