// The step ledger's slots and bits (ledger.h says what each holds), and the rule by which
// record_non_finite fills them, which the CPU function and the CUDA kernel share: their
// own header, for the .cu kernels, which cannot include Tensor.
#pragma once

#include <cstdint>

namespace dpt::ops {

enum LedgerSlot : int64_t { kLossSum, kCorrect, kLossNonFinite, kBadTag, kBadCause, kBadCount, kBadFirst, kLedgerSlots };
inline constexpr int64_t kNanBit = 1, kPosInfBit = 2, kNegInfBit = 4;

#if defined(__CUDACC__)
#define DPT_LEDGER_RULE __host__ __device__ inline
#else
#define DPT_LEDGER_RULE inline
#endif

// Records update `tag` as the first non-finite one: `cause` -1 (the loss) or a gradient's index.
DPT_LEDGER_RULE void write_non_finite(int64_t* ledger, int64_t tag, int64_t cause, int64_t count, int64_t first) {
  ledger[kBadTag] = tag;
  ledger[kBadCause] = cause;
  ledger[kBadCount] = count;
  ledger[kBadFirst] = first;
}

// The start of ending update `tag`: consumes its loss bits, keeps a record already there
// (the first non-finite update is the one to report) and records a non-finite loss before
// any gradient. Returns whether the gradients are still to be looked at.
DPT_LEDGER_RULE bool begin_non_finite_record(int64_t* ledger, int64_t tag) {
  const int64_t loss_bits = ledger[kLossNonFinite];
  ledger[kLossNonFinite] = 0;
  if (ledger[kBadTag] != 0) return false;
  if (loss_bits != 0) {
    write_non_finite(ledger, tag, -1, 0, loss_bits);
    return false;
  }
  return true;
}

}  // namespace dpt::ops
