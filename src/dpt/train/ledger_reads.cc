#include "dpt/train/ledger_reads.h"

namespace dpt::train {

std::pair<int64_t, int64_t> LedgerReads::where(int64_t tag) const {
  for (const auto& [t, at] : unread_) {
    if (t == tag) return at;
  }
  return {0, 0};
}

}  // namespace dpt::train
