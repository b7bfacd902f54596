// The CPU backend's losses (softmax cross-entropy, squared error) and argmax: plain loops
// over [N, K] rows.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "dpt/ops/cpu/kernels.h"
#include "dpt/ops/ops.h"

namespace dpt::ops::cpu {

namespace {
// One value per example, reduced as asked (the sum in double).
Tensor reduce_examples(const Tensor& per_example, Reduction reduction) {
  if (reduction == Reduction::none) return per_example;
  const float* l = per_example.data<float>();
  const int64_t n = per_example.numel();
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += l[i];
  const double value = reduction == Reduction::sum ? total : total / static_cast<double>(n);
  return Tensor::full({1}, static_cast<float>(value), per_example.device());
}

// The upstream gradient of example i: its own (none), or the reduced one's share.
float example_scale(const float* grad_out, int64_t i, int64_t n, Reduction reduction) {
  return reduction == Reduction::none  ? grad_out[i]
         : reduction == Reduction::sum ? grad_out[0]
                                       : grad_out[0] / static_cast<float>(n);
}
}  // namespace

CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor& labels, Reduction reduction,
                                         float label_smoothing) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  const float* z = logits.data<float>();
  const int64_t* y = labels.data<int64_t>();

  // Softmax probabilities are kept for backward: d loss_i / d z_ij = p_ij - target_ij.
  Tensor probs = Tensor::empty({n, k}, DType::f32, logits.device());
  Tensor per_example = Tensor::empty({n}, DType::f32, logits.device());
  float* p = probs.data<float>();
  float* l = per_example.data<float>();
  check_labels(labels, k);  // the message the GPU path's host check gives too
  for (int64_t i = 0; i < n; ++i) {
    const float* row = z + i * k;
    // Subtracting the row maximum keeps exp() from overflowing on large logits.
    const float max = *std::max_element(row, row + k);
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(row[j] - max));
    const double log_sum = std::log(sum);
    for (int64_t j = 0; j < k; ++j) p[i * k + j] = static_cast<float>(std::exp(row[j] - max - log_sum));
    double loss = log_sum - (row[y[i]] - max);  // -log p_iy
    if (label_smoothing > 0.0f) {
      // -sum_j target_j log p_ij = (1 - s)(-log p_iy) + s mean_j(-log p_ij)
      double mean = 0.0;
      for (int64_t j = 0; j < k; ++j) mean += log_sum - (row[j] - max);
      loss = (1.0 - label_smoothing) * loss + label_smoothing * mean / static_cast<double>(k);
    }
    l[i] = static_cast<float>(loss);
  }
  return {reduce_examples(per_example, reduction), probs};
}

Tensor cross_entropy_backward(const Tensor& probs, const Tensor& labels, const Tensor& grad_out, Reduction reduction,
                              float label_smoothing) {
  const int64_t n = probs.dim(0), k = probs.dim(1);
  Tensor grad = probs.clone();
  float* g = grad.data<float>();
  const int64_t* y = labels.data<int64_t>();
  const float* go = grad_out.data<float>();
  const float spread = label_smoothing / static_cast<float>(k);  // 0 without smoothing: p - onehot exactly
  for (int64_t i = 0; i < n; ++i) {
    g[i * k + y[i]] -= 1.0f - label_smoothing;
    const float scale = example_scale(go, i, n, reduction);
    for (int64_t j = 0; j < k; ++j) g[i * k + j] = (g[i * k + j] - spread) * scale;
  }
  return grad;
}

Tensor mse_forward(const Tensor& x, const Tensor& t, Reduction reduction) {
  const int64_t n = x.dim(0), k = x.numel() / std::max<int64_t>(n, 1);
  const float* a = x.data<float>();
  const float* b = t.data<float>();
  Tensor per_example = Tensor::empty({n}, DType::f32, x.device());
  float* l = per_example.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      const double d = static_cast<double>(a[i * k + j]) - b[i * k + j];
      sum += d * d;
    }
    l[i] = static_cast<float>(sum / static_cast<double>(k));
  }
  return reduce_examples(per_example, reduction);
}

Tensor mse_backward(const Tensor& x, const Tensor& t, const Tensor& grad_out, Reduction reduction) {
  const int64_t n = x.dim(0), k = x.numel() / std::max<int64_t>(n, 1);
  const float* a = x.data<float>();
  const float* b = t.data<float>();
  const float* go = grad_out.data<float>();
  Tensor grad = Tensor::empty(x.shape(), DType::f32, x.device());
  float* g = grad.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float scale = 2.0f * example_scale(go, i, n, reduction) / static_cast<float>(k);
    for (int64_t j = 0; j < k; ++j) g[i * k + j] = (a[i * k + j] - b[i * k + j]) * scale;
  }
  return grad;
}

Tensor argmax(const Tensor& x) {
  const int64_t n = x.dim(0), k = x.dim(1);
  Tensor out = Tensor::empty({n}, DType::i64, x.device());
  const float* v = x.data<float>();
  int64_t* idx = out.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) idx[i] = std::max_element(v + i * k, v + (i + 1) * k) - (v + i * k);
  return out;
}

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  const Tensor predicted = argmax(logits);
  const int64_t* p = predicted.data<int64_t>();
  const int64_t* y = labels.data<int64_t>();
  int64_t correct = 0;
  for (int64_t i = 0; i < labels.dim(0); ++i) correct += p[i] == y[i];
  return correct;
}

}  // namespace dpt::ops::cpu
