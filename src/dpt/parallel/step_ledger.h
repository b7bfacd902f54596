// What the host reads of the replicas' step ledgers (ops/ledger.h): the figures of the steps
// since the last read, summed over the job, and the first update since then whose loss or
// gradients held a NaN or an infinity, over every device and process of the job.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "dpt/parallel/step_result.h"

namespace dpt::parallel {

// A non-finite update as one device (or the whole job) recorded it.
struct NonFiniteUpdate {
  int64_t tag = 0;     // the update's tag (the training loop's global step); 0: none
  int64_t cause = -1;  // -1: the loss; i >= 0: the i-th parameter's gradient
  int64_t count = 0;   // its non-finite values (0 for the loss)
  int64_t first = 0;   // ops::kNanBit, kPosInfBit, kNegInfBit: the first value's; the loss: every loss's
};

struct StepLedger {
  StepResult figures;
  std::optional<NonFiniteUpdate> non_finite;
};

// The job's answer from every device's record (tag 0: nothing recorded): the earliest
// tag; at that tag the loss before a gradient (its bits ORed over the devices that saw a
// bad loss: a sum of the losses would be NaN for NaN or +inf with -inf), else the gradient
// record (the gradients are equal on every replica after the allreduce).
std::optional<NonFiniteUpdate> first_non_finite(const std::vector<NonFiniteUpdate>& records);

}  // namespace dpt::parallel
