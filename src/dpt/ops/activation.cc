#include "dpt/autograd/node.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/check.h"
#include "dpt/ops/ops.h"

namespace dpt::ops {

Tensor activation(const Tensor& x, Activation a) {
  require_f32(x, activation_name(a), "input");
  Tensor out = backend_for(x).activation_forward(x, a);
  if (autograd::should_record({&x})) {
    autograd::record(out, activation_name(a), {&x}, [x = x.detach(), a](const Tensor& grad_out) -> std::vector<Tensor> {
      return {backend_for(grad_out).activation_backward(grad_out, x, a)};
    });
  }
  return out;
}

}  // namespace dpt::ops
