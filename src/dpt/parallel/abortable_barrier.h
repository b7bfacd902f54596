// A reusable barrier for the in-process ranks that can be aborted: std::barrier cannot
// release its waiters when a peer has failed, and a failed peer must never hang the job.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>

namespace dpt::parallel {

class AbortableBarrier {
 public:
  explicit AbortableBarrier(int parties) : parties_(parties) {}

  // Blocks until all parties have arrived; throws CollectiveAborted once abort() was called.
  void arrive_and_wait();
  void abort(const std::string& reason);

 private:
  void throw_if_aborted() const;

  std::mutex mutex_;
  std::condition_variable released_;
  const int parties_;
  int arrived_ = 0;
  unsigned long phase_ = 0;
  bool aborted_ = false;
  std::string reason_;
};

}  // namespace dpt::parallel
