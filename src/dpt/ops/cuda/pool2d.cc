// Max and average pooling of the CUDA backend on cuDNN. cuDNN's backward reads the
// forward's input and output, so the forward keeps both for it.
#include "dpt/ops/cuda/cuda_kernels.h"
#include "dpt/ops/cuda/device_tensor.h"

namespace dpt::ops::cuda {

namespace {
using dpt::cuda::check;
using dpt::cuda::check_op;

class PoolDesc {
 public:
  PoolDesc(PoolKind kind, int kernel, int stride) {
    check(cudnnCreatePoolingDescriptor(&desc_), "cudnnCreatePoolingDescriptor");
    // No padding is ever used, so including or excluding it gives the same average.
    const cudnnPoolingMode_t mode =
        kind == PoolKind::max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    check(cudnnSetPooling2dDescriptor(desc_, mode, CUDNN_NOT_PROPAGATE_NAN, kernel, kernel, 0, 0, stride, stride),
          "cudnnSetPooling2dDescriptor");
  }
  ~PoolDesc() { cudnnDestroyPoolingDescriptor(desc_); }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
  operator cudnnPoolingDescriptor_t() const { return desc_; }

 private:
  cudnnPoolingDescriptor_t desc_ = nullptr;
};

struct PoolSaved {
  Tensor x, y;
};
}  // namespace

PoolResult pool2d_forward(const Tensor& x, PoolKind kind, int kernel, int stride, const Shape& out_shape) {
  auto& ctx = context_of(x);
  Tensor y = Tensor::empty(out_shape, DType::f32, x.device());
  const PoolDesc pool(kind, kernel, stride);
  const TensorDesc x_desc(x.shape()), y_desc(out_shape);
  const float one = 1.0f, zero = 0.0f;
  check_op(cudnnPoolingForward(ctx.cudnn, pool, &one, x_desc, f32(x), &zero, y_desc, f32(y)), "cudnnPoolingForward",
           ctx.stream);
  PoolResult result;
  result.out = y;
  result.workspace = std::make_shared<PoolSaved>(PoolSaved{x.detach(), y.detach()});
  return result;
}

Tensor pool2d_backward(const Tensor& grad_out, const PoolResult& forward, PoolKind kind, int kernel, int stride,
                       const Shape& x_shape) {
  auto& ctx = context_of(grad_out);
  const auto& saved = *static_cast<const PoolSaved*>(forward.workspace.get());
  // Zeroed first: an input element no window covers (5x5 with kernel 2, stride 2: the last
  // row and column) may be left unwritten by cuDNN's backward, average pooling's above all,
  // and its gradient is 0.
  Tensor grad_x = Tensor::zeros(x_shape, DType::f32, grad_out.device());
  const PoolDesc pool(kind, kernel, stride);
  const TensorDesc x_desc(x_shape), y_desc(grad_out.shape());
  const float one = 1.0f, zero = 0.0f;
  check_op(cudnnPoolingBackward(ctx.cudnn, pool, &one, y_desc, f32(saved.y), y_desc, f32(grad_out), x_desc,
                                f32(saved.x), &zero, x_desc, f32(grad_x)),
           "cudnnPoolingBackward", ctx.stream);
  return grad_x;
}

}  // namespace dpt::ops::cuda
