// The CPU backend's softmax cross-entropy and argmax: plain loops over [N, K] logits.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "dpt/ops/cpu/kernels.h"
#include "dpt/ops/ops.h"

namespace dpt::ops::cpu {

CrossEntropyResult cross_entropy_forward(const Tensor& logits, const Tensor& labels, Reduction reduction) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  const float* z = logits.data<float>();
  const int64_t* y = labels.data<int64_t>();

  // Softmax probabilities are kept for backward: d loss_i / d z_ij = p_ij - [j == y_i].
  Tensor probs = Tensor::empty({n, k}, DType::f32, logits.device());
  Tensor per_example = Tensor::empty({n}, DType::f32, logits.device());
  float* p = probs.data<float>();
  float* l = per_example.data<float>();
  check_labels(labels, k);  // the message the GPU path's host check gives too
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = z + i * k;
    // Subtracting the row maximum keeps exp() from overflowing on large logits.
    const float max = *std::max_element(row, row + k);
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(row[j] - max));
    const double log_sum = std::log(sum);
    for (int64_t j = 0; j < k; ++j) p[i * k + j] = static_cast<float>(std::exp(row[j] - max - log_sum));
    l[i] = static_cast<float>(log_sum - (row[y[i]] - max));
    total += l[i];
  }
  if (reduction == Reduction::none) return {per_example, probs};
  const double value = reduction == Reduction::sum ? total : total / static_cast<double>(n);
  return {Tensor::full({1}, static_cast<float>(value), logits.device()), probs};
}

Tensor cross_entropy_backward(const Tensor& probs, const Tensor& labels, const Tensor& grad_out, Reduction reduction) {
  const int64_t n = probs.dim(0), k = probs.dim(1);
  Tensor grad = probs.clone();
  float* g = grad.data<float>();
  const int64_t* y = labels.data<int64_t>();
  const float* go = grad_out.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    g[i * k + y[i]] -= 1.0f;
    const float scale = reduction == Reduction::none  ? go[i]
                        : reduction == Reduction::sum ? go[0]
                                                      : go[0] / static_cast<float>(n);
    for (int64_t j = 0; j < k; ++j) g[i * k + j] *= scale;
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
