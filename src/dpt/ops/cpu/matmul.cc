#include <dnnl.hpp>

#include "dpt/ops/cpu/dnnl_context.h"
#include "dpt/ops/cpu/kernels.h"

namespace dpt::ops::cpu {

namespace {
// A row-major [rows, cols] matrix, or its transpose described by swapped strides, so that
// backward's A^T and B^T cost no copy.
dnnl::memory::desc matrix_desc(const Tensor& m, bool transpose) {
  const int64_t rows = m.dim(0), cols = m.dim(1);
  if (!transpose) return dnnl::memory::desc({rows, cols}, dnnl::memory::data_type::f32, dnnl::memory::dims{cols, 1});
  return dnnl::memory::desc({cols, rows}, dnnl::memory::data_type::f32, dnnl::memory::dims{1, cols});
}
}  // namespace

Tensor matmul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b) {
  struct Primitive {
    dnnl::matmul primitive;
  };
  const auto a_desc = matrix_desc(a, transpose_a);
  const auto b_desc = matrix_desc(b, transpose_b);
  const int64_t m = a_desc.dims()[0], n = b_desc.dims()[1];
  const auto c_desc = plain_desc({m, n}, dnnl::memory::format_tag::ab);
  auto& prim = cached<Primitive>(cache_key("matmul", a.shape(), transpose_a, b.shape(), transpose_b), [&] {
    const dnnl::matmul::desc desc(a_desc, b_desc, c_desc);
    return Primitive{dnnl::matmul(dnnl::matmul::primitive_desc(desc, engine()))};
  });
  Tensor c = Tensor::empty({m, n}, DType::f32, a.device());
  prim.primitive.execute(stream(), {{DNNL_ARG_SRC, as_memory(a_desc, a)},
                                    {DNNL_ARG_WEIGHTS, as_memory(b_desc, b)},
                                    {DNNL_ARG_DST, as_memory(c_desc, c)}});
  stream().wait();
  return c;
}

}  // namespace dpt::ops::cpu
