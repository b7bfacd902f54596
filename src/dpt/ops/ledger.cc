#include "dpt/ops/ledger.h"

#include <cmath>
#include <cstring>

#include "dpt/ops/backend.h"
#include "dpt/ops/check.h"

namespace dpt::ops {

namespace {
void require_ledger(const Tensor& ledger, const std::string& op) {
  require(ledger.defined() && ledger.dtype() == DType::i64 && ledger.numel() == kLedgerSlots, op,
          "the ledger must be an int64 tensor of " + std::to_string(kLedgerSlots) + " elements (ops::new_ledger)");
}
}  // namespace

Tensor new_ledger(Device device) { return Tensor::zeros({kLedgerSlots}, DType::i64, device); }

void add_step_figures(const Tensor& ledger, const Tensor& loss_sum, const Tensor& logits, const Tensor& labels) {
  const std::string op = "add_step_figures";
  require_ledger(ledger, op);
  require_f32(loss_sum, op, "loss_sum");
  require(loss_sum.numel() == 1, op, "loss_sum must hold one value, got shape " + shape_str(loss_sum.shape()));
  require_rank(logits, 2, op, "logits");
  require(labels.defined() && labels.dtype() == DType::i64 && labels.ndim() == 1 && labels.dim(0) == logits.dim(0),
          op, "labels must be int64 [" + std::to_string(logits.dim(0)) + "] for logits " + shape_str(logits.shape()));
  require_same_device({&ledger, &loss_sum, &logits, &labels}, op);
  backend_for(ledger).add_step_figures(ledger, loss_sum, logits, labels);
}

void record_non_finite(const Tensor& ledger, int64_t tag, const std::vector<Tensor>& gradients) {
  const std::string op = "record_non_finite";
  require_ledger(ledger, op);
  require(tag > 0, op, "the update's tag must be positive (0 means none), got " + std::to_string(tag));
  for (const Tensor& g : gradients) {
    if (!g.defined()) continue;
    require_f32(g, op, "a gradient");
    require_same_device({&ledger, &g}, op);
  }
  backend_for(ledger).record_non_finite(ledger, tag, gradients);
}

LedgerValues take_ledger(const Tensor& ledger) {
  require_ledger(ledger, "take_ledger");
  const Tensor host = ledger.to(Device::cpu());
  std::vector<int64_t> v(host.data<int64_t>(), host.data<int64_t>() + kLedgerSlots);
  LedgerValues values;
  std::memcpy(&values.loss_sum, &v[kLossSum], sizeof(double));
  values.correct = v[kCorrect];
  values.bad_tag = v[kBadTag];
  values.bad_cause = v[kBadCause];
  values.bad_count = v[kBadCount];
  values.bad_first = v[kBadFirst];
  std::vector<int64_t> reset(kLedgerSlots, 0);
  reset[kLossNonFinite] = v[kLossNonFinite];
  ledger.copy_from(Tensor::from_labels(reset));
  return values;
}

int64_t non_finite_bit(double value) {
  if (std::isnan(value)) return kNanBit;
  if (std::isinf(value)) return value > 0 ? kPosInfBit : kNegInfBit;
  return 0;
}

}  // namespace dpt::ops
