// The step ledger: what a training step leaves on its device for the host to read when it
// needs figures, instead of copying them back (and waiting for a GPU) at every step. The
// ops below add to it on the ledger's device; take_ledger reads it.
//   ledger: int64 [kLedgerSlots] on the step's device, all zeros when new (new_ledger):
//     kLossSum       the summed loss since the last read, as a double's bits (Tensor has no
//                    f64, and the host sums losses in double: the same precision on a GPU)
//     kCorrect       the examples predicted right since the last read
//     kLossNonFinite bits (kNanBit, kPosInfBit, kNegInfBit) of the non-finite losses of the
//                    update being computed; record_non_finite consumes them
//     kBadTag        the tag of the first non-finite update since the last read (0: none)
//     kBadCause      -1: its loss; i >= 0: gradients[i] was the first with non-finite values
//     kBadCount      how many of that gradient's values were non-finite (0 for the loss)
//     kBadFirst      the bit of the first non-finite value (the loss: of every loss's)
// Every sum is an integer or a single thread's, so the ledger's values do not depend on
// how a GPU schedules its threads.
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/core/tensor.h"
#include "dpt/ops/ledger_slots.h"

namespace dpt::ops {

// A zeroed ledger on `device`.
Tensor new_ledger(Device device);

// ledger[kLossSum] += loss_sum [1]; ledger[kCorrect] += the rows of logits [N, K] whose
// argmax (the first maximum) is their label (int64 [N]); a non-finite loss sets its bit in
// ledger[kLossNonFinite]. All on the ledger's device.
void add_step_figures(const Tensor& ledger, const Tensor& loss_sum, const Tensor& logits, const Tensor& labels);

// Ends the update tagged `tag` (> 0): unless the ledger already holds a non-finite update,
// records this one's if its losses (kLossNonFinite) or `gradients` (f32, on the ledger's
// device; undefined ones are skipped but keep their index) hold a NaN or an infinity. The
// loss counts first, then the gradients in order. Clears kLossNonFinite.
void record_non_finite(const Tensor& ledger, int64_t tag, const std::vector<Tensor>& gradients);

// What take_ledger read.
struct LedgerValues {
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t bad_tag = 0;  // 0: every update since the last read was finite
  int64_t bad_cause = 0;
  int64_t bad_count = 0;
  int64_t bad_first = 0;
};

// Copies the ledger to the host (waiting for its device) and zeroes it, all but
// kLossNonFinite, which belongs to an update that may still be running.
LedgerValues take_ledger(const Tensor& ledger);

// The bit (kNanBit, ...) of a non-finite value; 0 for a finite one.
int64_t non_finite_bit(double value);

}  // namespace dpt::ops
