// Gradient bucketing with communication overlapped with backward, as PyTorch DDP and
// Horovod do it. The parameters are grouped into buckets of about `bucket_bytes`, in
// reverse order (backward produces the last layers' gradients first). While backward runs,
// autograd reports each gradient as it becomes final (autograd::GradReadyHook); once every
// gradient of a bucket is final, the bucket is packed and its allreduce handed to this
// rank's communication thread, while backward goes on with the earlier layers.
//
// Every rank must issue the same collectives in the same order, so buckets are launched
// strictly in bucket order: a bucket that fills early waits for the ones before it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dpt/core/tensor.h"
#include "dpt/core/trace.h"
#include "dpt/parallel/communicator.h"

namespace dpt::parallel {

// A bucket size in MiB (the config's bucket_mb; 0: one allreduce after backward) must be a
// finite number >= 0: throws ConfigError (`bucket_mb`) otherwise.
void check_bucket_mb(double megabytes);
// The size in bytes; checks it first.
size_t bucket_bytes_from_mb(double megabytes);

// Indices into `params` for each bucket: parameters taken from last to first, a bucket
// closed once it holds at least `bucket_bytes` (a parameter larger than that gets a bucket
// of its own). bucket_bytes == 0: everything in one bucket.
std::vector<std::vector<size_t>> assign_buckets(const std::vector<Tensor>& params, size_t bucket_bytes);

class GradientBucketer {
 public:
  // `comm` and `params` (one rank's replica) must outlive the bucketer. `lane`: where
  // --trace shows the communication thread's bucket allreduces; `compression`: how the
  // buckets travel (Communicator::allreduce_compressed).
  GradientBucketer(Communicator& comm, int rank, std::vector<Tensor> params, size_t bucket_bytes,
                   trace::LaneName lane = {trace::communication_lane(0), "allreduce"},
                   Compression compression = Compression::none);
  ~GradientBucketer();
  GradientBucketer(const GradientBucketer&) = delete;
  GradientBucketer& operator=(const GradientBucketer&) = delete;

  // Runs `backward` (empty: a rank with no examples this step, whose gradients are zero)
  // with the grad-ready hook installed, so buckets are allreduced while it runs; then
  // launches what is left and waits. On return every parameter's gradient holds the sum
  // over all ranks times `scale` (a parameter backward never reached counts as zero).
  // Rethrows the first error of backward or of a collective.
  void backward_and_allreduce(const std::function<void()>& backward, float scale);

  size_t num_buckets() const { return buckets_.size(); }
  const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }
  // Buckets whose allreduce was handed to the communication thread before backward had
  // returned, in the last call: the overlap that actually happened.
  size_t launched_during_backward() const { return launched_during_backward_; }

 private:
  void on_grad_ready(const Tensor& leaf);
  void launch_ready_buckets();
  void launch(size_t bucket);
  void communication_loop();
  void wait_until_idle(std::unique_lock<std::mutex>& lock);

  Communicator& comm_;
  Compression compression_;
  const int rank_;
  const std::vector<Tensor> params_;
  std::vector<std::vector<size_t>> buckets_;
  std::unordered_map<const TensorImpl*, size_t> bucket_of_;  // parameter -> its bucket
  std::vector<std::vector<float>> flat_;                     // one packed buffer per bucket

  // Owned by the compute thread (the one running backward_and_allreduce).
  std::vector<size_t> pending_;  // gradients not yet final, per bucket
  size_t next_to_launch_ = 0;
  float scale_ = 1.0f;
  bool in_backward_ = false;
  size_t launched_during_backward_ = 0;

  // Shared with the communication thread; guarded by mutex_.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<size_t> queue_;  // buckets packed and waiting for their allreduce
  bool busy_ = false;         // the thread is allreducing a bucket
  bool cancel_ = false;       // drop queued buckets (after an error)
  bool stopping_ = false;
  std::exception_ptr error_;
  float queued_scale_ = 1.0f;
  const trace::LaneName lane_;
  std::thread thread_;
};

}  // namespace dpt::parallel
