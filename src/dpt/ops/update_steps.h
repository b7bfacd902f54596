// The hyper-parameters of one optimizer step, as the backends' update kernels take them
// (ops::Backend::sgd_update, adam_update). Plain C++17: the CUDA kernels include it too.
#pragma once

namespace dpt::ops {

struct SgdStep {
  float lr = 0, momentum = 0, decay = 0;
  bool first = false;     // the velocity's first step: v = d
  bool nesterov = false;
};
struct AdamStep {
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, decay = 0;
  bool decoupled = false;  // AdamW: p *= 1 - lr * decay; else decay * p joins the gradient
  float bias_correction1 = 1, bias_correction2 = 1;  // 1 - beta^t
};

}  // namespace dpt::ops
