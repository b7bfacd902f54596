// The step ledger's slots and bits (ledger.h says what each holds): their own header, for
// the .cu kernels, which cannot include Tensor.
#pragma once

#include <cstdint>

namespace dpt::ops {

enum LedgerSlot : int64_t { kLossSum, kCorrect, kLossNonFinite, kBadTag, kBadCause, kBadCount, kBadFirst, kLedgerSlots };
inline constexpr int64_t kNanBit = 1, kPosInfBit = 2, kNegInfBit = 4;

}  // namespace dpt::ops
