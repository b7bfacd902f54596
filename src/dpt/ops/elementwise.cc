#include "dpt/autograd/node.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/check.h"
#include "dpt/ops/fused_kernels.h"
#include "dpt/ops/ops.h"

namespace dpt::ops {

namespace {
void check_same_shape(const std::string& op, const Tensor& a, const Tensor& b) {
  require_f32(a, op, "left operand");
  require_f32(b, op, "right operand");
  require(a.shape() == b.shape(), op,
          "shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) + " differ (no broadcasting)");
  require_same_device({&a, &b}, op);
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  check_same_shape("add", a, b);
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

Tensor mul(const Tensor& a, const Tensor& b) {
  check_same_shape("mul", a, b);
  Tensor out = backend_for(a).multiply(a, b);
  if (autograd::should_record({&a, &b})) {
    autograd::record(out, "mul", {&a, &b}, [a = a.detach(), b = b.detach()](const Tensor& grad_out) {
      const Backend& backend = backend_for(grad_out);
      return std::vector<Tensor>{backend.multiply(grad_out, b), backend.multiply(grad_out, a)};
    });
  }
  return out;
}

Tensor add_relu(const Tensor& a, const Tensor& b) {
  check_same_shape("add_relu", a, b);
  const FusedKernels* fused = fused_kernels_for(a);
  if (!fused) return relu(add(a, b));
  Tensor out = fused->add_relu(a, b);
  if (autograd::should_record({&a, &b})) {
    // The ReLU's mask from its output (out > 0 exactly where a + b > 0), then the sum's
    // gradient, shared by both sides as add's.
    autograd::record(out, "add_relu", {&a, &b}, [out = out.detach()](const Tensor& grad_out) -> std::vector<Tensor> {
      const Tensor grad_sum = backend_for(grad_out).relu_backward(grad_out, out);
      return {grad_sum, grad_sum};
    });
  }
  return out;
}

}  // namespace dpt::ops
