// Matrix products of the CUDA backend on cuBLAS (column-major), for row-major tensors.
#include "dpt/ops/cuda/cuda_kernels.h"
#include "dpt/ops/cuda/device_tensor.h"
#include "dpt/ops/cuda/launch.h"

namespace dpt::ops::cuda {

namespace {
using dpt::cuda::check;
using dpt::cuda::check_op;

// Row-major c [m, n] = op(a) @ op(b), op(a) [m, k], op(b) [k, n]. cuBLAS sees a row-major
// matrix as its transpose, so it computes c^T = op(b)^T op(a)^T with the operands swapped.
void gemm(dpt::cuda::Context& ctx, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const float* a,
          const float* b, float* c) {
  const float one = 1.0f, zero = 0.0f;
  const int lda = static_cast<int>(transpose_a ? m : k);  // a's row length as stored
  const int ldb = static_cast<int>(transpose_b ? k : n);
  check_op(cublasSgemm(ctx.cublas, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                       static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &one, b, ldb, a, lda, &zero, c,
                       static_cast<int>(n)),
           "cublasSgemm", ctx.stream);
}
}  // namespace

Tensor linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  auto& ctx = context_of(x);
  const int64_t n = x.dim(0), in = x.dim(1), out = weight.dim(0);
  Tensor y = Tensor::empty({n, out}, DType::f32, x.device());
  gemm(ctx, false, true, n, out, in, f32(x), f32(weight), f32(y));  // x W^T
  if (bias.defined()) add_row_bias(f32(y), f32(bias), n, out, ctx.stream);
  return y;
}

Tensor linear_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape) {
  auto& ctx = context_of(grad_out);
  Tensor grad_x = Tensor::empty(x_shape, DType::f32, grad_out.device());
  gemm(ctx, false, false, grad_out.dim(0), weight.dim(1), weight.dim(0), f32(grad_out), f32(weight), f32(grad_x));
  return grad_x;
}

void linear_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                             const Tensor& grad_bias) {
  auto& ctx = context_of(grad_out);
  const int64_t n = grad_out.dim(0), out = grad_out.dim(1);
  gemm(ctx, true, false, out, x.dim(1), n, f32(grad_out), f32(x), f32(grad_weight));  // grad_out^T x
  if (grad_bias.defined()) sum_rows(f32(grad_out), f32(grad_bias), n, out, ctx.stream);
}

Tensor matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b) {
  auto& ctx = context_of(a);
  const int64_t m = transpose_a ? a.dim(1) : a.dim(0), k = transpose_a ? a.dim(0) : a.dim(1);
  const int64_t n = transpose_b ? b.dim(0) : b.dim(1);
  Tensor c = Tensor::empty({m, n}, DType::f32, a.device());
  gemm(ctx, transpose_a, transpose_b, m, n, k, f32(a), f32(b), f32(c));
  return c;
}

}  // namespace dpt::ops::cuda
