#include "dpt/ops/backend.h"

namespace dpt::ops {

Tensor Backend::relu_avg_pool_backward(const Tensor& grad_pooled, const PoolResult& pooling, const Tensor& relu_out,
                                       int pool) const {
  return relu_backward(pool2d_backward(grad_pooled, pooling, PoolKind::avg, pool, pool, relu_out.shape()), relu_out);
}

const Backend& backend_for(Device device) { return device.kind == Device::Kind::cuda ? cuda_backend() : cpu_backend(); }

}  // namespace dpt::ops
