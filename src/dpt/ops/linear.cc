#include "dpt/autograd/node.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/check.h"
#include "dpt/ops/ops.h"

namespace dpt::ops {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const std::string op = "linear";
  require_rank(x, 2, op, "input");
  require_rank(weight, 2, op, "weight");
  require(x.dim(1) == weight.dim(1), op,
          "input " + shape_str(x.shape()) + " has " + std::to_string(x.dim(1)) + " features but weight " +
              shape_str(weight.shape()) + " expects " + std::to_string(weight.dim(1)));
  if (bias.defined()) {
    require_rank(bias, 1, op, "bias");
    require(bias.dim(0) == weight.dim(0), op,
            "bias " + shape_str(bias.shape()) + " does not match weight " + shape_str(weight.shape()));
  }
  require_same_device({&x, &weight, &bias}, op);
  Tensor out = backend_for(x).linear_forward(x, weight, bias);
  if (autograd::should_record({&x, &weight, &bias})) {
    const bool need_x = x.needs_grad(), need_w = weight.needs_grad();
    const bool need_b = bias.defined() && bias.needs_grad();
    autograd::record(out, op, {&x, &weight, &bias},
                     [x = x.detach(), weight = weight.detach(), need_x, need_w, need_b,
                      has_bias = bias.defined()](const Tensor& grad_out) -> std::vector<Tensor> {
                       Tensor grad_x, grad_w, grad_b;
                       if (need_x) grad_x = backend_for(grad_out).linear_backward_data(grad_out, weight, x.shape());
                       if (need_w || need_b) {
                         grad_w = Tensor::empty(weight.shape(), DType::f32, weight.device());
                         if (has_bias) grad_b = Tensor::empty({weight.dim(0)}, DType::f32, weight.device());
                         backend_for(grad_out).linear_backward_weights(grad_out, x, grad_w, grad_b);
                       }
                       return {grad_x, need_w ? grad_w : Tensor(), need_b ? grad_b : Tensor()};
                     });
  }
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  const std::string op = "matmul";
  require_rank(a, 2, op, "left operand");
  require_rank(b, 2, op, "right operand");
  require(a.dim(1) == b.dim(0), op, "cannot multiply " + shape_str(a.shape()) + " by " + shape_str(b.shape()));
  require_same_device({&a, &b}, op);
  Tensor out = backend_for(a).matmul(a, false, b, false);
  if (autograd::should_record({&a, &b})) {
    autograd::record(out, op, {&a, &b},
                     [a = a.detach(), b = b.detach(), need_a = a.needs_grad(),
                      need_b = b.needs_grad()](const Tensor& grad_out) -> std::vector<Tensor> {
                       // dA = dC B^T, dB = A^T dC
                       return {need_a ? backend_for(grad_out).matmul(grad_out, false, b, true) : Tensor(),
                               need_b ? backend_for(grad_out).matmul(a, true, grad_out, false) : Tensor()};
                     });
  }
  return out;
}

}  // namespace dpt::ops
