#include "dpt/parallel/step_ledger.h"

namespace dpt::parallel {

std::optional<NonFiniteUpdate> first_non_finite(const std::vector<NonFiniteUpdate>& records) {
  std::optional<NonFiniteUpdate> first;
  for (const NonFiniteUpdate& r : records) {
    if (r.tag == 0) continue;
    if (!first || r.tag < first->tag) {
      first = r;
    } else if (r.tag == first->tag && r.cause == -1) {
      if (first->cause == -1) {
        first->first |= r.first;
      } else {
        first = r;
      }
    }
  }
  return first;
}

}  // namespace dpt::parallel
