#include "dpt/autograd/node.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/check.h"
#include "dpt/ops/fused_kernels.h"
#include "dpt/ops/ops.h"

namespace dpt::ops {

namespace {
// Checks the operands and returns the convolution's output shape.
Shape checked_output_shape(const std::string& op, const Tensor& x, const Tensor& weight, const Tensor& bias, int stride,
                           int padding) {
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
  require(x.dim(2) + 2 * padding >= weight.dim(2) && x.dim(3) + 2 * padding >= weight.dim(3), op,
          "kernel " + shape_str(weight.shape()) + " is larger than the padded input " + shape_str(x.shape()));
  const int64_t out_h = (x.dim(2) + 2 * padding - weight.dim(2)) / stride + 1;
  const int64_t out_w = (x.dim(3) + 2 * padding - weight.dim(3)) / stride + 1;
  require_same_device({&x, &weight, &bias}, op);
  return {x.dim(0), weight.dim(0), out_h, out_w};
}

// The gradients of x, weight and bias from grad_z, the gradient of the convolution's own
// output (before any ReLU or pooling after it); undefined for inputs that need none.
struct ConvBackward {
  Tensor x, weight;  // detached
  ConvGeometry geometry;
  bool need_x, need_w, need_b, has_bias;

  static ConvBackward of(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvGeometry geometry) {
    return {x.detach(),     weight.detach(),     geometry,
            x.needs_grad(), weight.needs_grad(), bias.defined() && bias.needs_grad(),
            bias.defined()};
  }

  std::vector<Tensor> operator()(const Tensor& grad_z) const {
    Tensor grad_x, grad_w, grad_b;
    if (need_x) grad_x = backend_for(grad_z).conv2d_backward_data(grad_z, weight, x.shape(), geometry);
    if (need_w || need_b) {
      grad_w = Tensor::empty(weight.shape(), DType::f32, weight.device());
      if (has_bias) grad_b = Tensor::empty({weight.dim(0)}, DType::f32, weight.device());
      backend_for(grad_z).conv2d_backward_weights(grad_z, x, grad_w, grad_b, geometry);
    }
    return {grad_x, need_w ? grad_w : Tensor(), need_b ? grad_b : Tensor()};
  }

  // For conv2d_relu_avg_pool2d's first-layer kernel (FusedKernels::conv2d_relu_avg_pool_forward):
  // the weight and bias gradients straight from the pooled gradient; x needs none.
  std::vector<Tensor> first_layer_grads(const FusedKernels& fused, const Tensor& grad_pooled, const PoolResult& forward,
                                        int pool) const {
    const Tensor grad_w = Tensor::empty(weight.shape(), DType::f32, weight.device());
    const Tensor grad_b = has_bias ? Tensor::empty({weight.dim(0)}, DType::f32, weight.device()) : Tensor();
    fused.conv2d_relu_avg_pool_weight_grads(grad_pooled, forward, pool, x, geometry, grad_w, grad_b);
    return {Tensor(), need_w ? grad_w : Tensor(), need_b ? grad_b : Tensor()};
  }
};

// The top-left h x w corner of x's planes, with its gradient (the corner's gradient in a
// plane of zeros); x itself where the backend has no crop.
Tensor crop_corner(const Tensor& x, int64_t h, int64_t w) {
  const FusedKernels* fused = fused_kernels_for(x);
  Tensor out = fused ? fused->crop_corner(x, h, w) : Tensor();
  if (!out.defined()) return x;
  if (autograd::should_record({&x})) {
    autograd::record(out, "crop_corner", {&x}, [fused, x_shape = x.shape()](const Tensor& grad) -> std::vector<Tensor> {
      return {fused->pad_corner(grad, x_shape)};
    });
  }
  return out;
}

// The gradient of relu(z) from that of its average pooling (window == step == pool).
Tensor relu_avg_pool_backward(const Tensor& grad_pooled, const PoolResult& pooling, const Tensor& relu_out, int pool) {
  if (const FusedKernels* fused = fused_kernels_for(grad_pooled))
    return fused->relu_avg_pool_backward(grad_pooled, relu_out, pool);
  const Backend& backend = backend_for(grad_pooled);
  return backend.relu_backward(backend.pool2d_backward(grad_pooled, pooling, PoolKind::avg, pool, pool, relu_out.shape()),
                               relu_out);
}

// conv2d, or with `fuse_relu` conv2d_relu: one validation, one forward, one backward.
Tensor convolution(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, int padding, bool fuse_relu) {
  const std::string op = fuse_relu ? "conv2d_relu" : "conv2d";
  const Shape out_shape = checked_output_shape(op, x, weight, bias, stride, padding);
  const ConvGeometry geometry{stride, padding};
  Tensor out = backend_for(x).conv2d_forward(x, weight, bias, geometry, out_shape, fuse_relu);
  if (autograd::should_record({&x, &weight, &bias})) {
    // The fused op keeps its output: relu'(z) is 1 where relu(z) > 0, the same mask as z > 0.
    autograd::record(out, op, {&x, &weight, &bias},
                     [backward = ConvBackward::of(x, weight, bias, geometry),
                      relu_out = fuse_relu ? out.detach() : Tensor()](const Tensor& grad_out) -> std::vector<Tensor> {
                       if (!relu_out.defined()) return backward(grad_out);
                       return backward(backend_for(grad_out).relu_backward(grad_out, relu_out));
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

Tensor conv2d_relu_avg_pool2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int pool, int stride,
                              int padding) {
  const std::string op = "conv2d_relu_avg_pool2d";
  Shape conv_shape = checked_output_shape(op, x, weight, bias, stride, padding);
  require(pool >= 1, op, "pool must be >= 1");
  require(conv_shape[2] >= pool && conv_shape[3] >= pool, op,
          "window " + std::to_string(pool) + " is larger than the convolution's output " + shape_str(conv_shape));
  const Shape out_shape{conv_shape[0], conv_shape[1], conv_shape[2] / pool, conv_shape[3] / pool};
  // The pooling drops the convolution's last rows or columns where `pool` does not divide
  // them (LeNet's conv2: 9 x 9 outputs, 8 x 8 pooled), and without padding those read only
  // the input's last rows or columns. So the convolution runs on the corner of x that the
  // kept outputs read (12 x 12 of 13 x 13 there: 21% less work forward and backward), with
  // the same values: every kept output sums the same products.
  Tensor input = x;
  const int64_t kept_h = out_shape[2] * pool, kept_w = out_shape[3] * pool;
  if (padding == 0 && (kept_h < conv_shape[2] || kept_w < conv_shape[3])) {
    input = crop_corner(x, (kept_h - 1) * stride + weight.dim(2), (kept_w - 1) * stride + weight.dim(3));
    if (input.dim(2) < x.dim(2) || input.dim(3) < x.dim(3)) conv_shape = {conv_shape[0], conv_shape[1], kept_h, kept_w};
  }
  const ConvGeometry geometry{stride, padding};
  const Backend& backend = backend_for(x);
  const bool record = autograd::should_record({&input, &weight, &bias});
  const FusedKernels* fused = fused_kernels_for(x);
  if (fused && !(record && input.needs_grad())) {
    // A first layer (or no backward at all): one kernel, where the backend has it, that
    // never writes the convolution's output.
    PoolResult forward = fused->conv2d_relu_avg_pool_forward(input, weight, bias, geometry, pool, out_shape, record);
    if (forward.out.defined()) {
      Tensor out = forward.out;
      if (record) {
        forward.out = Tensor();  // backward needs the workspace, not the output
        autograd::record(out, op, {&input, &weight, &bias},
                         [backward = ConvBackward::of(input, weight, bias, geometry), fused, forward,
                          pool](const Tensor& grad_out) {
                           return backward.first_layer_grads(*fused, grad_out, forward, pool);
                         });
      }
      return out;
    }
  }
  const Tensor relu_out = backend.conv2d_forward(input, weight, bias, geometry, conv_shape, /*fuse_relu=*/true);
  PoolResult pooling = backend.pool2d_forward(relu_out, PoolKind::avg, pool, pool, out_shape);
  Tensor out = pooling.out;
  if (record) {
    pooling.out = Tensor();  // backward needs the ReLU's output, not the pooled one
    autograd::record(out, op, {&input, &weight, &bias},
                     [backward = ConvBackward::of(input, weight, bias, geometry), pooling, relu_out = relu_out.detach(),
                      pool](const Tensor& grad_out) -> std::vector<Tensor> {
                       return backward(relu_avg_pool_backward(grad_out, pooling, relu_out, pool));
                     });
  }
  return out;
}

}  // namespace dpt::ops
