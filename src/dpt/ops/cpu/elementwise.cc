// The CPU backend's elementwise kernels: plain loops, which the compiler vectorizes; none
// of them is large enough in LeNet or ResNet-18 to be worth a oneDNN primitive.
#include <atomic>
#include <cmath>
#include <cstring>

#include "dpt/ops/cpu/dnnl_context.h"
#include "dpt/ops/cpu/kernels.h"
#include "dpt/ops/cpu/layout.h"

namespace dpt::ops::cpu {

namespace {
std::atomic<bool> keep_layouts{true};

// The backend layout of a 4-D activation that a kernel left in one (not plain), or null.
bool in_backend_layout(const Tensor& t, dnnl::memory::desc& layout) {
  if (t.ndim() != 4 || t.storage().layout() == nullptr) return false;
  const dnnl::memory::desc plain = plain_desc(t.shape(), dnnl::memory::format_tag::nchw);
  layout = current_layout(t, plain);
  return layout != plain;
}

// Residual connections add two activations, and backward sums the gradients of a tensor
// read twice (a block's input feeds its first convolution and its shortcut). When one of
// them is in a backend layout (the convolutions' block), the sum is taken in that layout,
// element by element over the storage (blocked padding adds zeros to zeros), and stays in
// it: the next convolution, BatchNorm, ReLU or pooling reads it as is. The other operand
// is reordered into that layout only when it is in another one. Plain operands: plain.
// `finish` maps each sum to the output (the identity for add, a ReLU for add_relu).
template <class Finish>
Tensor add_then(const Tensor& a, const Tensor& b, Finish finish) {
  dnnl::memory::desc layout;
  if (keep_layouts.load(std::memory_order_relaxed)) {
    const bool a_laid_out = in_backend_layout(a, layout);
    if (a_laid_out || in_backend_layout(b, layout)) {
      const Tensor& lead = a_laid_out ? a : b;  // a + b == b + a, bit for bit
      const Tensor& other = a_laid_out ? b : a;
      const dnnl::memory::desc plain = plain_desc(a.shape(), dnnl::memory::format_tag::nchw);
      Tensor scratch;
      const dnnl::memory other_memory = input_in_layout(other, plain, layout, scratch);
      stream().wait();
      const LaidOutTensor out = output_in_layout(a.shape(), plain, layout);
      const float* pa = static_cast<const float*>(lead.storage().raw_data());
      const float* pb = static_cast<const float*>(other_memory.get_data_handle());
      float* po = static_cast<float*>(out.memory.get_data_handle());
      const int64_t n = static_cast<int64_t>(layout.get_size() / sizeof(float));
      for (int64_t i = 0; i < n; ++i) po[i] = finish(pa[i] + pb[i]);
      return out.tensor;
    }
  }
  Tensor out = Tensor::empty(a.shape(), DType::f32, a.device());
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  const int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i) po[i] = finish(pa[i] + pb[i]);
  return out;
}
}  // namespace

void set_keep_activation_layouts(bool on) { keep_layouts.store(on); }

Tensor add(const Tensor& a, const Tensor& b) {
  return add_then(a, b, [](float sum) { return sum; });
}

// The ReLU as oneDNN's JIT kernel computes it (max(s, 0) with maxps: -0 and NaN give +0),
// so that add_relu and relu(add) agree bit for bit.
Tensor add_relu(const Tensor& a, const Tensor& b) {
  return add_then(a, b, [](float sum) { return sum > 0.0f ? sum : 0.0f; });
}

// Plain operands in, a plain product out: Dropout's mask meets a Linear's output (2-D) or
// an activation read in plain order (data<float>() reorders a backend layout).
Tensor multiply(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape(), DType::f32, a.device());
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  const int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i) po[i] = pa[i] * pb[i];
  return out;
}

void accumulate(const Tensor& into, const Tensor& from) {
  dnnl::memory::desc layout;
  if (keep_layouts.load(std::memory_order_relaxed) && (into.ndim() == 4 || from.ndim() == 4)) {
    const Shape& shape = into.ndim() == 4 ? into.shape() : from.shape();
    const dnnl::memory::desc plain = plain_desc(shape, dnnl::memory::format_tag::nchw);
    const bool into_laid_out = into.shape() == shape && in_backend_layout(into, layout);
    dnnl::memory::desc from_layout;
    if (into_laid_out || (from.shape() == shape && in_backend_layout(from, from_layout))) {
      // Into's storage keeps its layout (plain, or its backend layout); `from` is read in
      // it, reordered into a scratch copy when it differs (never converted in place).
      const dnnl::memory::desc target = into_laid_out ? layout : plain;
      Tensor scratch;
      const dnnl::memory from_memory = input_in_layout(from.with_shape(shape), plain, target, scratch);
      stream().wait();
      float* o = static_cast<float*>(into_laid_out ? into.storage().raw_data() : into.data<float>());
      const float* i = static_cast<const float*>(from_memory.get_data_handle());
      const int64_t n = static_cast<int64_t>(target.get_size() / sizeof(float));
      for (int64_t k = 0; k < n; ++k) o[k] += i[k];
      return;
    }
  }
  float* o = into.data<float>();
  const float* i = from.data<float>();
  const int64_t n = into.numel();
  for (int64_t k = 0; k < n; ++k) o[k] += i[k];
}

void pack(const std::vector<Tensor>& tensors, float* flat) {
  for (const Tensor& t : tensors) {
    std::memcpy(flat, t.data<float>(), t.bytes());
    flat += t.numel();
  }
}

void unpack(const float* in, const std::vector<Tensor>& tensors, float scale) {
  for (const Tensor& t : tensors) {
    float* out = t.data<float>();
    const int64_t n = t.numel();
    for (int64_t k = 0; k < n; ++k) out[k] = in[k] * scale;
    in += n;
  }
}

void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& velocity, const SgdStep& s) {
  float* p = param.data<float>();
  const float* g = grad.data<float>();
  const int64_t n = param.numel();
  const float lr = s.lr, decay = s.decay, momentum = s.momentum;
  if (!velocity.defined()) {
    if (decay == 0.0f) {
      for (int64_t k = 0; k < n; ++k) p[k] -= lr * g[k];
    } else {
      for (int64_t k = 0; k < n; ++k) p[k] -= lr * (g[k] + decay * p[k]);
    }
    return;
  }
  float* v = velocity.data<float>();
  for (int64_t k = 0; k < n; ++k) {
    const float d = g[k] + decay * p[k];
    v[k] = s.first ? d : momentum * v[k] + d;
    p[k] -= lr * (s.nesterov ? d + momentum * v[k] : v[k]);
  }
}

void adam_update(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const AdamStep& s) {
  float* p = param.data<float>();
  const float* g = grad.data<float>();
  float* m = exp_avg.data<float>();
  float* v = exp_avg_sq.data<float>();
  const int64_t n = param.numel();
  const float step_size = s.lr / s.bias_correction1;
  const float sqrt_bc2 = std::sqrt(s.bias_correction2);
  const float shrink = s.decoupled ? 1.0f - s.lr * s.decay : 1.0f;
  const float l2 = s.decoupled ? 0.0f : s.decay;
  for (int64_t k = 0; k < n; ++k) {
    const float gk = g[k] + l2 * p[k];
    p[k] *= shrink;
    m[k] = s.beta1 * m[k] + (1.0f - s.beta1) * gk;
    v[k] = s.beta2 * v[k] + (1.0f - s.beta2) * gk * gk;
    p[k] -= step_size * m[k] / (std::sqrt(v[k]) / sqrt_bc2 + s.eps);
  }
}

void batch_norm_update_running(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                               const Tensor& variance, float momentum, double unbiased) {
  float* rm = running_mean.data<float>();
  float* rv = running_var.data<float>();
  const float* m = mean.data<float>();
  const float* var = variance.data<float>();
  for (int64_t c = 0; c < running_mean.numel(); ++c) {
    rm[c] = static_cast<float>((1.0 - momentum) * rm[c] + momentum * static_cast<double>(m[c]));
    rv[c] = static_cast<float>((1.0 - momentum) * rv[c] + momentum * unbiased * static_cast<double>(var[c]));
  }
}

}  // namespace dpt::ops::cpu
