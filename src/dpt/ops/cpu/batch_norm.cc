#include <bit>
#include <cstdint>
#include <dnnl.hpp>

#include "dpt/ops/cpu/dnnl_context.h"
#include "dpt/ops/cpu/kernels.h"
#include "dpt/ops/cpu/layout.h"

namespace dpt::ops::cpu {

namespace {
using tag = dnnl::memory::format_tag;
using dnnl::batch_normalization_backward;
using dnnl::batch_normalization_forward;
using flags = dnnl::normalization_flags;

// oneDNN 2.6 takes gamma and beta as two [C] memories with use_scale | use_shift (the older
// use_scale_shift wants them stacked in one [2, C]). use_global_stats makes mean and
// variance inputs instead of outputs, in forward and backward alike.
flags bn_flags(bool use_batch_stats) {
  const flags affine = flags::use_scale | flags::use_shift;
  return use_batch_stats ? affine : affine | flags::use_global_stats;
}

dnnl::memory::desc plain_layout(const Shape& x) { return plain_desc(x, tag::nchw); }
dnnl::memory::desc channel_desc(int64_t channels) { return plain_desc({channels}, tag::a); }

// The bits of eps, so that two different epsilons never share a primitive.
uint32_t eps_key(float eps) { return std::bit_cast<uint32_t>(eps); }

struct BnForward {
  batch_normalization_forward::primitive_desc pd;
  batch_normalization_forward primitive;
};

// Always forward_training: with batch statistics that is what computes them, and with
// given ones it is the hint the backward primitive needs (the computation is the same).
const BnForward& forward_primitive(const dnnl::memory::desc& data, bool use_batch_stats, float eps) {
  const std::string key = cache_key("bn_fwd", layout_key(data), use_batch_stats, eps_key(eps));
  return cached<BnForward>(key, [&] {
    const batch_normalization_forward::desc desc(dnnl::prop_kind::forward_training, data, eps,
                                                 bn_flags(use_batch_stats));
    batch_normalization_forward::primitive_desc pd(desc, engine());
    return BnForward{pd, batch_normalization_forward(pd)};
  });
}
}  // namespace

BatchNormResult batch_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, bool use_batch_stats,
                                   const Tensor& mean, const Tensor& variance, float eps) {
  const int64_t channels = x.dim(1);
  const dnnl::memory::desc plain = plain_layout(x.shape());
  const dnnl::memory::desc layout = current_layout(x, plain);
  const BnForward& prim = forward_primitive(layout, use_batch_stats, eps);

  BatchNormResult result;
  if (use_batch_stats) {
    result.mean = Tensor::empty({channels});
    result.variance = Tensor::empty({channels});
  } else {
    result.mean = mean;
    result.variance = variance;
  }
  Tensor unused;
  const dnnl::memory src = input_in_layout(x, plain, layout, unused);
  const LaidOutTensor out = output_in_layout(x.shape(), plain, layout);
  const dnnl::memory::desc stats = channel_desc(channels);
  prim.primitive.execute(stream(), {{DNNL_ARG_SRC, src},
                                    {DNNL_ARG_DST, out.memory},
                                    {DNNL_ARG_SCALE, as_memory(stats, gamma)},
                                    {DNNL_ARG_SHIFT, as_memory(stats, beta)},
                                    {DNNL_ARG_MEAN, as_memory(stats, result.mean)},
                                    {DNNL_ARG_VARIANCE, as_memory(stats, result.variance)}});
  stream().wait();
  result.out = out.tensor;
  return result;
}

BatchNormGrads batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   bool use_batch_stats, const Tensor& mean, const Tensor& variance, float eps) {
  struct Primitive {
    batch_normalization_backward::primitive_desc pd;
    batch_normalization_backward primitive;
  };
  const int64_t channels = x.dim(1);
  const dnnl::memory::desc plain = plain_layout(x.shape());
  const dnnl::memory::desc layout = current_layout(x, plain);
  const std::string key = cache_key("bn_bwd", layout_key(layout), use_batch_stats, eps_key(eps));
  auto& prim = cached<Primitive>(key, [&] {
    // prop_kind::backward: diff_src and the scale / shift gradients (backward_data would
    // leave the latter out).
    const batch_normalization_backward::desc desc(dnnl::prop_kind::backward, layout, layout, eps,
                                                  bn_flags(use_batch_stats));
    batch_normalization_backward::primitive_desc pd(desc, engine(), forward_primitive(layout, use_batch_stats, eps).pd);
    return Primitive{pd, batch_normalization_backward(pd)};
  });

  BatchNormGrads grads;
  grads.grad_gamma = Tensor::empty({channels});
  grads.grad_beta = Tensor::empty({channels});
  Tensor unused, dy_scratch;
  const dnnl::memory src = input_in_layout(x, plain, layout, unused);
  const dnnl::memory dy = input_in_layout(grad_out, plain, layout, dy_scratch);
  const LaidOutTensor grad_x = output_in_layout(x.shape(), plain, layout);
  const dnnl::memory::desc stats = channel_desc(channels);
  prim.primitive.execute(stream(), {{DNNL_ARG_SRC, src},
                                    {DNNL_ARG_DIFF_DST, dy},
                                    {DNNL_ARG_SCALE, as_memory(stats, gamma)},
                                    // Unread, but oneDNN 2.6 rejects the call ("could not execute a
                                    // primitive", invalid_arguments) when use_shift lacks it.
                                    {DNNL_ARG_SHIFT, as_memory(stats, beta)},
                                    {DNNL_ARG_MEAN, as_memory(stats, mean)},
                                    {DNNL_ARG_VARIANCE, as_memory(stats, variance)},
                                    {DNNL_ARG_DIFF_SRC, grad_x.memory},
                                    {DNNL_ARG_DIFF_SCALE, as_memory(stats, grads.grad_gamma)},
                                    {DNNL_ARG_DIFF_SHIFT, as_memory(stats, grads.grad_beta)}});
  stream().wait();
  grads.grad_x = grad_x.tensor;
  return grads;
}

}  // namespace dpt::ops::cpu
