// When the training loop reads the step ledgers (parallel::ReplicaGroup::read_ledger):
// each read copies the figures and the divergence record back from the devices and waits
// for them, so on GPUs the loop reads only every kLedgerReadEvery updates, and besides:
//   * after the first update of an epoch (the progress line has figures from the start),
//   * before a checkpoint is written and at an epoch's end (the figures must be complete,
//     and a diverged update must stop the run before its parameters are saved);
//   * after every update with on_nan skip, which must know before applying an update.
// A diverged update is then seen at most kLedgerReadEvery - 1 updates late; its message
// names its own epoch and step, remembered here until the read. Updates applied after it
// are lost with the run, which stops anyway.
// Where reading costs nothing (CPU devices) the loop reads after every micro-batch and
// every update: the host then adds the figures in the order it always did, bit for bit.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "dpt/train/divergence_guard.h"

namespace dpt::train {

inline constexpr int64_t kLedgerReadEvery = 8;

class LedgerReads {
 public:
  LedgerReads(bool reads_are_free, OnNan on_nan) : free_(reads_are_free), every_update_(reads_are_free || on_nan == OnNan::skip) {}

  bool after_each_micro_batch() const { return free_; }
  // The update tagged `tag` ran at (epoch, step) (1-based, as messages print them) and its
  // finite check is queued.
  void checked(int64_t tag, int64_t epoch, int64_t step) { unread_.push_back({tag, {epoch, step}}); }
  // Whether to read now, after an update; `epoch_has_figures`: the epoch's figures hold a read.
  bool due(bool epoch_has_figures) const {
    return every_update_ || !epoch_has_figures || static_cast<int64_t>(unread_.size()) >= kLedgerReadEvery;
  }
  bool any_unread() const { return !unread_.empty(); }
  // After a read: the (epoch, step) of update `tag` among those it covered ({0, 0} if none).
  std::pair<int64_t, int64_t> where(int64_t tag) const;
  void read_done() { unread_.clear(); }

 private:
  bool free_;
  bool every_update_;
  std::vector<std::pair<int64_t, std::pair<int64_t, int64_t>>> unread_;  // tag, (epoch, step)
};

}  // namespace dpt::train
