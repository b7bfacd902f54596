#include "dpt/autograd/node.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/check.h"
#include "dpt/ops/ops.h"

namespace dpt::ops {

Tensor add(const Tensor& a, const Tensor& b) {
  require_f32(a, "add", "left operand");
  require_f32(b, "add", "right operand");
  require(a.shape() == b.shape(), "add",
          "shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) + " differ (no broadcasting)");
  require_same_device({&a, &b}, "add");
  Tensor out = backend_for(a).add(a, b);
  if (autograd::should_record({&a, &b})) {
    // The sum passes its gradient unchanged to both sides; the engine copies before it
    // accumulates, so sharing the buffer is safe.
    autograd::record(out, "add", {&a, &b}, [](const Tensor& grad_out) -> std::vector<Tensor> {
      return {grad_out, grad_out};
    });
  }
  return out;
}

}  // namespace dpt::ops
