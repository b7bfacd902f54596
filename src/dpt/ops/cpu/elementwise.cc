// The CPU backend's elementwise kernels: plain loops, which the compiler vectorizes; none
// of them is large enough in LeNet or ResNet-18 to be worth a oneDNN primitive.
#include <cstring>

#include "dpt/ops/cpu/kernels.h"

namespace dpt::ops::cpu {

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape(), DType::f32, a.device());
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  const int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
  return out;
}

void accumulate(const Tensor& into, const Tensor& from) {
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

void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& velocity, float lr, float momentum, float decay,
                bool first) {
  float* p = param.data<float>();
  const float* g = grad.data<float>();
  const int64_t n = param.numel();
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
    v[k] = first ? d : momentum * v[k] + d;
    p[k] -= lr * v[k];
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
