#include "dpt/parallel/abortable_barrier.h"

#include "dpt/parallel/communicator.h"

namespace dpt::parallel {

void AbortableBarrier::throw_if_aborted() const {
  if (aborted_) throw CollectiveAborted("collective aborted: " + reason_);
}

void AbortableBarrier::arrive_and_wait() {
  std::unique_lock lock(mutex_);
  throw_if_aborted();
  const unsigned long phase = phase_;
  if (++arrived_ == parties_) {
    arrived_ = 0;
    ++phase_;
    released_.notify_all();
    return;
  }
  released_.wait(lock, [&] { return aborted_ || phase_ != phase; });
  if (phase_ == phase) throw_if_aborted();
}

void AbortableBarrier::abort(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (!aborted_) reason_ = reason;
    aborted_ = true;
  }
  released_.notify_all();
}

}  // namespace dpt::parallel
