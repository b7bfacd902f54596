#include "dpt/autograd/node.h"
#include "dpt/ops/check.h"
#include "dpt/ops/ops.h"

namespace dpt::ops {

Tensor add(const Tensor& a, const Tensor& b) {
  require_f32(a, "add", "left operand");
  require_f32(b, "add", "right operand");
  require(a.shape() == b.shape(), "add",
          "shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) + " differ (no broadcasting)");
  Tensor out = Tensor::empty(a.shape(), DType::f32, a.device());
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  const int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
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
