// Reverse-mode differentiation over the graph that the ops recorded.
#pragma once

#include <functional>

#include "dpt/core/tensor.h"

namespace dpt::autograd {

// Called during backward() once a leaf's gradient is final: every recorded op that uses the
// leaf has added its part (the leaf's .grad() stays undefined if none had a gradient for
// it). A data-parallel trainer uses it to start allreducing a bucket of gradients while
// backward still computes the earlier layers' (as PyTorch DDP and Horovod do).
using GradReadyHook = std::function<void(const Tensor& leaf)>;

// Installs `hook` for the backward() calls this thread makes during the guard's lifetime
// (each device worker builds and walks its own graph, so the hook is per thread).
class GradReadyHookGuard {
 public:
  explicit GradReadyHookGuard(GradReadyHook hook);
  ~GradReadyHookGuard();
  GradReadyHookGuard(const GradReadyHookGuard&) = delete;
  GradReadyHookGuard& operator=(const GradReadyHookGuard&) = delete;

 private:
  GradReadyHook hook_;
  const GradReadyHook* previous_;
};

// How backward adds a gradient into another (into += from: f32, equal size, one device).
// The ops layer, above this one, installs its backends' kernels when the program starts;
// until then host tensors are summed by a plain loop and device tensors refused.
using GradientAdder = void (*)(const Tensor& into, const Tensor& from);
void set_gradient_adder(GradientAdder adder);

// Seeds d(root)/d(root) = 1, walks the recorded ops from root back to the leaves in reverse
// topological order, and adds each leaf's gradient into its .grad(): gradients accumulate
// across calls until zero_grad(), as in PyTorch.
void backward(const Tensor& root);

}  // namespace dpt::autograd
