#include "dpt/autograd/node.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/check.h"
#include "dpt/ops/ops.h"

namespace dpt::ops {

namespace {
// conv2d, or with `fuse_relu` conv2d_relu: one validation, one forward, one backward.
Tensor convolution(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, int padding, bool fuse_relu) {
  const std::string op = fuse_relu ? "conv2d_relu" : "conv2d";
  require_rank(x, 4, op, "input");
  require_rank(weight, 4, op, "weight");
  require(stride >= 1 && padding >= 0, op, "stride must be >= 1 and padding >= 0");
  require(x.dim(1) == weight.dim(1), op,
          "input " + shape_str(x.shape()) + " has " + std::to_string(x.dim(1)) + " channels but weight " +
              shape_str(weight.shape()) + " expects " + std::to_string(weight.dim(1)));
  if (bias.defined()) {
    require_rank(bias, 1, op, "bias");
    require(bias.dim(0) == weight.dim(0), op,
            "bias " + shape_str(bias.shape()) + " does not match weight " + shape_str(weight.shape()));
  }
  const int64_t out_h = (x.dim(2) + 2 * padding - weight.dim(2)) / stride + 1;
  const int64_t out_w = (x.dim(3) + 2 * padding - weight.dim(3)) / stride + 1;
  require(x.dim(2) + 2 * padding >= weight.dim(2) && x.dim(3) + 2 * padding >= weight.dim(3), op,
          "kernel " + shape_str(weight.shape()) + " is larger than the padded input " + shape_str(x.shape()));
  const Shape out_shape{x.dim(0), weight.dim(0), out_h, out_w};
  const ConvGeometry geometry{stride, padding};

  require_same_device({&x, &weight, &bias}, op);
  Tensor out = backend_for(x).conv2d_forward(x, weight, bias, geometry, out_shape, fuse_relu);
  if (autograd::should_record({&x, &weight, &bias})) {
    const bool need_x = x.needs_grad(), need_w = weight.needs_grad();
    const bool need_b = bias.defined() && bias.needs_grad();
    // The fused op keeps its output: relu'(z) is 1 where relu(z) > 0, the same mask as z > 0.
    autograd::record(
        out, op, {&x, &weight, &bias},
        [x = x.detach(), weight = weight.detach(), relu_out = fuse_relu ? out.detach() : Tensor(), need_x, need_w,
         need_b, geometry, has_bias = bias.defined()](const Tensor& grad_out) -> std::vector<Tensor> {
          const Tensor grad_z = relu_out.defined() ? backend_for(grad_out).relu_backward(grad_out, relu_out) : grad_out;
          Tensor grad_x, grad_w, grad_b;
          if (need_x) grad_x = backend_for(grad_z).conv2d_backward_data(grad_z, weight, x.shape(), geometry);
          if (need_w || need_b) {
            grad_w = Tensor::empty(weight.shape(), DType::f32, weight.device());
            if (has_bias) grad_b = Tensor::empty({weight.dim(0)}, DType::f32, weight.device());
            backend_for(grad_z).conv2d_backward_weights(grad_z, x, grad_w, grad_b, geometry);
          }
          return {grad_x, need_w ? grad_w : Tensor(), need_b ? grad_b : Tensor()};
        });
  }
  return out;
}
}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, int padding) {
  return convolution(x, weight, bias, stride, padding, /*fuse_relu=*/false);
}

Tensor conv2d_relu(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, int padding) {
  return convolution(x, weight, bias, stride, padding, /*fuse_relu=*/true);
}

}  // namespace dpt::ops
