#include <bit>
#include <cstdint>
#include <dnnl.hpp>
#include <memory>
#include <unordered_map>

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
// fuse_norm_relu applies a ReLU as the primitive writes, keeping where it passed in a
// workspace that the backward primitive reads to mask the incoming gradient.
flags bn_flags(bool use_batch_stats, bool fuse_relu) {
  flags f = flags::use_scale | flags::use_shift;
  if (!use_batch_stats) f = f | flags::use_global_stats;
  if (fuse_relu) f = f | flags::fuse_norm_relu;
  return f;
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
const BnForward& forward_primitive(const dnnl::memory::desc& data, bool use_batch_stats, bool fuse_relu, float eps) {
  const std::string key = cache_key("bn_fwd", layout_key(data), use_batch_stats, fuse_relu, eps_key(eps));
  return cached<BnForward>(key, [&] {
    const batch_normalization_forward::desc desc(dnnl::prop_kind::forward_training, data, eps,
                                                 bn_flags(use_batch_stats, fuse_relu));
    batch_normalization_forward::primitive_desc pd(desc, engine());
    return BnForward{pd, batch_normalization_forward(pd)};
  });
}

// The forward, with the ReLU's workspace where fuse_relu asks for it.
BatchNormReluResult forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, bool use_batch_stats,
                            const Tensor& mean, const Tensor& variance, float eps, bool fuse_relu) {
  const int64_t channels = x.dim(1);
  const dnnl::memory::desc plain = plain_layout(x.shape());
  const dnnl::memory::desc layout = current_layout(x, plain);
  const BnForward& prim = forward_primitive(layout, use_batch_stats, fuse_relu, eps);

  BatchNormReluResult fused;
  BatchNormResult& result = fused.batch_norm;
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
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src},
                                             {DNNL_ARG_DST, out.memory},
                                             {DNNL_ARG_SCALE, as_memory(stats, gamma)},
                                             {DNNL_ARG_SHIFT, as_memory(stats, beta)},
                                             {DNNL_ARG_MEAN, as_memory(stats, result.mean)},
                                             {DNNL_ARG_VARIANCE, as_memory(stats, result.variance)}};
  if (fuse_relu) {
    auto mask = std::make_shared<dnnl::memory>(prim.pd.workspace_desc(), engine());
    args.insert({DNNL_ARG_WORKSPACE, *mask});
    fused.relu_mask = mask;
  }
  prim.primitive.execute(stream(), args);
  stream().wait();
  result.out = out.tensor;
  return fused;
}

// The backward; with a relu_mask (fuse_relu's workspace) grad_out is masked by it first.
BatchNormGrads backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        bool use_batch_stats, const Tensor& mean, const Tensor& variance, float eps,
                        const std::shared_ptr<void>& relu_mask) {
  const bool fuse_relu = relu_mask != nullptr;
  struct Primitive {
    batch_normalization_backward::primitive_desc pd;
    batch_normalization_backward primitive;
  };
  const int64_t channels = x.dim(1);
  const dnnl::memory::desc plain = plain_layout(x.shape());
  const dnnl::memory::desc layout = current_layout(x, plain);
  const std::string key = cache_key("bn_bwd", layout_key(layout), use_batch_stats, fuse_relu, eps_key(eps));
  auto& prim = cached<Primitive>(key, [&] {
    // prop_kind::backward: diff_src and the scale / shift gradients (backward_data would
    // leave the latter out).
    const batch_normalization_backward::desc desc(dnnl::prop_kind::backward, layout, layout, eps,
                                                  bn_flags(use_batch_stats, fuse_relu));
    batch_normalization_backward::primitive_desc pd(desc, engine(),
                                                    forward_primitive(layout, use_batch_stats, fuse_relu, eps).pd);
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
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src},
                                             {DNNL_ARG_DIFF_DST, dy},
                                             {DNNL_ARG_SCALE, as_memory(stats, gamma)},
                                             // Unread, but oneDNN 2.6 rejects the call ("could not execute a
                                             // primitive", invalid_arguments) when use_shift lacks it.
                                             {DNNL_ARG_SHIFT, as_memory(stats, beta)},
                                             {DNNL_ARG_MEAN, as_memory(stats, mean)},
                                             {DNNL_ARG_VARIANCE, as_memory(stats, variance)},
                                             {DNNL_ARG_DIFF_SRC, grad_x.memory},
                                             {DNNL_ARG_DIFF_SCALE, as_memory(stats, grads.grad_gamma)},
                                             {DNNL_ARG_DIFF_SHIFT, as_memory(stats, grads.grad_beta)}};
  if (fuse_relu) args.insert({DNNL_ARG_WORKSPACE, *static_cast<dnnl::memory*>(relu_mask.get())});
  prim.primitive.execute(stream(), args);
  stream().wait();
  grads.grad_x = grad_x.tensor;
  return grads;
}
}  // namespace

BatchNormResult batch_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, bool use_batch_stats,
                                   const Tensor& mean, const Tensor& variance, float eps) {
  return forward(x, gamma, beta, use_batch_stats, mean, variance, eps, /*fuse_relu=*/false).batch_norm;
}

BatchNormGrads batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   bool use_batch_stats, const Tensor& mean, const Tensor& variance, float eps) {
  return backward(grad_out, x, gamma, beta, use_batch_stats, mean, variance, eps, nullptr);
}

BatchNormReluResult batch_norm_relu_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                            bool use_batch_stats, const Tensor& mean, const Tensor& variance,
                                            float eps) {
  return forward(x, gamma, beta, use_batch_stats, mean, variance, eps, /*fuse_relu=*/true);
}

BatchNormGrads batch_norm_relu_backward(const Tensor& grad_out, const BatchNormReluResult& forward, const Tensor& x,
                                        const Tensor& gamma, const Tensor& beta, bool use_batch_stats, float eps) {
  return backward(grad_out, x, gamma, beta, use_batch_stats, forward.batch_norm.mean, forward.batch_norm.variance, eps,
                  forward.relu_mask);
}

}  // namespace dpt::ops::cpu
