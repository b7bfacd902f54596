#include "dpt/autograd/node.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/check.h"
#include "dpt/ops/ops.h"

namespace dpt::ops {

Tensor relu(const Tensor& x) {
  require_f32(x, "relu", "input");
  Tensor out = backend_for(x).relu_forward(x);
  if (autograd::should_record({&x})) {
    autograd::record(out, "relu", {&x}, [x = x.detach()](const Tensor& grad_out) -> std::vector<Tensor> {
      return {backend_for(grad_out).relu_backward(grad_out, x)};
    });
  }
  return out;
}

}  // namespace dpt::ops
