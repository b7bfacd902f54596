// The CPU backend's step-ledger kernels (ops/ledger.h): plain loops. On the CPU the host
// reads the ledger at once, so these only have to agree with the CUDA ones on the values.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "dpt/ops/cpu/kernels.h"
#include "dpt/ops/ledger.h"

namespace dpt::ops::cpu {

void add_step_figures(const Tensor& ledger, const Tensor& loss_sum, const Tensor& logits, const Tensor& labels) {
  int64_t* slots = ledger.data<int64_t>();
  const double loss = loss_sum.item();  // the float loss, summed in double as the host always did
  double sum = 0;
  std::memcpy(&sum, &slots[kLossSum], sizeof(double));
  sum += loss;
  std::memcpy(&slots[kLossSum], &sum, sizeof(double));
  slots[kCorrect] += count_correct(logits, labels);
  slots[kLossNonFinite] |= non_finite_bit(loss);
}

namespace {
// Non-finite values of one gradient, and the bit of the first.
struct Scan {
  int64_t count = 0;
  int64_t first = 0;
};
Scan scan(const Tensor& grad) {
  const float* g = grad.data<float>();
  const int64_t n = grad.numel();
  Scan s;
  // Runs every step over every gradient: count first (a loop without branches), and look
  // for the first bad value only when there is one.
  for (int64_t i = 0; i < n; ++i) s.count += std::isfinite(g[i]) ? 0 : 1;
  if (s.count > 0) s.first = non_finite_bit(*std::find_if(g, g + n, [](float v) { return !std::isfinite(v); }));
  return s;
}
}  // namespace

void record_non_finite(const Tensor& ledger, int64_t tag, const std::vector<Tensor>& gradients) {
  int64_t* slots = ledger.data<int64_t>();
  if (!begin_non_finite_record(slots, tag)) return;
  for (size_t i = 0; i < gradients.size(); ++i) {
    if (!gradients[i].defined()) continue;
    const Scan s = scan(gradients[i]);
    if (s.count == 0) continue;
    write_non_finite(slots, tag, static_cast<int64_t>(i), s.count, s.first);
    return;
  }
}

}  // namespace dpt::ops::cpu
