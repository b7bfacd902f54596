#include "dpt/ops/backend.h"

#include <stdexcept>

#include "dpt/autograd/engine.h"

namespace dpt::ops {

Tensor Backend::relu_avg_pool_backward(const Tensor& grad_pooled, const PoolResult& pooling, const Tensor& relu_out,
                                       int pool) const {
  return relu_backward(pool2d_backward(grad_pooled, pooling, PoolKind::avg, pool, pool, relu_out.shape()), relu_out);
}

void Backend::conv2d_relu_avg_pool_weight_grads(const Tensor& /*grad_pooled*/, const PoolResult& /*forward*/,
                                                int /*pool*/, const Tensor& /*x*/, ConvGeometry /*geometry*/,
                                                const Tensor& /*grad_weight*/, const Tensor& /*grad_bias*/) const {
  throw std::logic_error(
      "Backend::conv2d_relu_avg_pool_weight_grads: this backend has no conv2d_relu_avg_pool_forward to follow");
}

Tensor Backend::pad_corner(const Tensor& /*grad*/, const Shape& /*x_shape*/) const {
  throw std::logic_error("Backend::pad_corner: this backend crops nothing, so nothing needs padding back");
}

const Backend& backend_for(Device device) { return device.kind == Device::Kind::cuda ? cuda_backend() : cpu_backend(); }

namespace {
// Backward sums gradients with the backends' kernels, on whichever device they are: the
// autograd layer, below this one, is told how when the program starts.
const bool kGradientAdderInstalled = [] {
  autograd::set_gradient_adder([](const Tensor& into, const Tensor& from) { backend_for(into).accumulate(into, from); });
  return true;
}();
}  // namespace

}  // namespace dpt::ops
