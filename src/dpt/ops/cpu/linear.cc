#include <dnnl.hpp>

#include "dpt/ops/cpu/dnnl_context.h"
#include "dpt/ops/cpu/kernels.h"

namespace dpt::ops::cpu {

namespace {
using tag = dnnl::memory::format_tag;
using dnnl::inner_product_backward_data;
using dnnl::inner_product_backward_weights;
using dnnl::inner_product_forward;

struct LinearDescs {
  dnnl::memory::desc x, weight, bias, out;
};
LinearDescs linear_descs(const Shape& x, const Shape& weight) {
  return {plain_desc(x, tag::nc), plain_desc(weight, tag::oi), plain_desc({weight[0]}, tag::x),
          plain_desc({x[0], weight[0]}, tag::nc)};
}

struct LinearForward {
  inner_product_forward::primitive_desc pd;
  inner_product_forward primitive;
};
const LinearForward& forward_primitive(const Shape& x, const Shape& weight, bool with_bias) {
  return cached<LinearForward>(cache_key("linear_fwd", x, weight, with_bias), [&] {
    const LinearDescs d = linear_descs(x, weight);
    const auto desc = with_bias
                          ? inner_product_forward::desc(dnnl::prop_kind::forward_training, d.x, d.weight, d.bias, d.out)
                          : inner_product_forward::desc(dnnl::prop_kind::forward_training, d.x, d.weight, d.out);
    inner_product_forward::primitive_desc pd(desc, engine());
    return LinearForward{pd, inner_product_forward(pd)};
  });
}
}  // namespace

Tensor linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const bool with_bias = bias.defined();
  const LinearDescs d = linear_descs(x.shape(), weight.shape());
  Tensor out = Tensor::empty({x.dim(0), weight.dim(0)}, DType::f32, x.device());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, as_memory(d.x, x)},
                                             {DNNL_ARG_WEIGHTS, as_memory(d.weight, weight)},
                                             {DNNL_ARG_DST, as_memory(d.out, out)}};
  if (with_bias) args.insert({DNNL_ARG_BIAS, as_memory(d.bias, bias)});
  forward_primitive(x.shape(), weight.shape(), with_bias).primitive.execute(stream(), args);
  stream().wait();
  return out;
}

Tensor linear_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape) {
  struct Primitive {
    inner_product_backward_data::primitive_desc pd;
    inner_product_backward_data primitive;
  };
  auto& prim = cached<Primitive>(cache_key("linear_bwd_data", x_shape, weight.shape()), [&] {
    const LinearDescs d = linear_descs(x_shape, weight.shape());
    const inner_product_backward_data::desc desc(d.x, d.weight, d.out);
    inner_product_backward_data::primitive_desc pd(desc, engine(),
                                                   forward_primitive(x_shape, weight.shape(), false).pd);
    return Primitive{pd, inner_product_backward_data(pd)};
  });
  const LinearDescs d = linear_descs(x_shape, weight.shape());
  Tensor grad_x = Tensor::empty(x_shape, DType::f32, grad_out.device());
  prim.primitive.execute(stream(), {{DNNL_ARG_DIFF_DST, as_memory(d.out, grad_out)},
                                    {DNNL_ARG_WEIGHTS, as_memory(d.weight, weight)},
                                    {DNNL_ARG_DIFF_SRC, as_memory(d.x, grad_x)}});
  stream().wait();
  return grad_x;
}

void linear_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                             const Tensor& grad_bias) {
  struct Primitive {
    inner_product_backward_weights::primitive_desc pd;
    inner_product_backward_weights primitive;
  };
  const bool with_bias = grad_bias.defined();
  auto& prim = cached<Primitive>(cache_key("linear_bwd_weights", x.shape(), grad_weight.shape(), with_bias), [&] {
    const LinearDescs d = linear_descs(x.shape(), grad_weight.shape());
    const auto desc = with_bias ? inner_product_backward_weights::desc(d.x, d.weight, d.bias, d.out)
                                : inner_product_backward_weights::desc(d.x, d.weight, d.out);
    inner_product_backward_weights::primitive_desc pd(desc, engine(),
                                                      forward_primitive(x.shape(), grad_weight.shape(), with_bias).pd);
    return Primitive{pd, inner_product_backward_weights(pd)};
  });
  const LinearDescs d = linear_descs(x.shape(), grad_weight.shape());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, as_memory(d.out, grad_out)},
                                             {DNNL_ARG_SRC, as_memory(d.x, x)},
                                             {DNNL_ARG_DIFF_WEIGHTS, as_memory(d.weight, grad_weight)}};
  if (with_bias) args.insert({DNNL_ARG_DIFF_BIAS, as_memory(d.bias, grad_bias)});
  prim.primitive.execute(stream(), args);
  stream().wait();
}

}  // namespace dpt::ops::cpu
