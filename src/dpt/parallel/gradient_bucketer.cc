#include "dpt/parallel/gradient_bucketer.h"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "dpt/autograd/engine.h"
#include "dpt/core/config_error.h"
#include "dpt/core/denormals.h"

namespace dpt::parallel {

void check_bucket_mb(double megabytes) {
  if (!(megabytes >= 0) || !std::isfinite(megabytes)) {
    throw ConfigError("bucket_mb", "`bucket_mb` must be a number >= 0, got " + std::to_string(megabytes));
  }
}

size_t bucket_bytes_from_mb(double megabytes) {
  check_bucket_mb(megabytes);
  return static_cast<size_t>(megabytes * 1024.0 * 1024.0);
}

std::vector<std::vector<size_t>> assign_buckets(const std::vector<Tensor>& params, size_t bucket_bytes) {
  std::vector<std::vector<size_t>> buckets;
  size_t filled = 0;
  for (size_t i = params.size(); i-- > 0;) {
    if (buckets.empty() || (bucket_bytes > 0 && filled >= bucket_bytes)) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(i);
    filled += static_cast<size_t>(params[i].numel()) * sizeof(float);
  }
  return buckets;
}

GradientBucketer::GradientBucketer(Communicator& comm, int rank, std::vector<Tensor> params, size_t bucket_bytes,
                                   trace::LaneName lane, Compression compression)
    : comm_(comm),
      compression_(compression),
      rank_(rank),
      params_(std::move(params)),
      buckets_(assign_buckets(params_, bucket_bytes)),
      lane_(std::move(lane)) {
  flat_.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    size_t count = 0;
    for (size_t i : buckets_[b]) {
      if (params_[i].dtype() != DType::f32) throw std::invalid_argument("GradientBucketer: parameters must be f32");
      bucket_of_[params_[i].impl()] = b;
      count += static_cast<size_t>(params_[i].numel());
    }
    flat_[b].resize(count);
  }
  thread_ = std::thread([this] { communication_loop(); });
}

GradientBucketer::~GradientBucketer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void GradientBucketer::backward_and_allreduce(const std::function<void()>& backward, float scale) {
  pending_.assign(buckets_.size(), 0);
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].size();
  next_to_launch_ = 0;
  launched_during_backward_ = 0;
  {
    std::lock_guard lock(mutex_);
    queued_scale_ = scale;
    cancel_ = false;
    error_ = nullptr;
  }
  try {
    if (backward) {
      in_backward_ = true;
      autograd::GradReadyHookGuard hook([this](const Tensor& leaf) { on_grad_ready(leaf); });
      backward();
      in_backward_ = false;
    }
    // Parameters backward never reached (or a rank without examples): zero gradients.
    while (next_to_launch_ < buckets_.size()) launch(next_to_launch_++);
  } catch (...) {
    in_backward_ = false;
    // Let the collective in flight finish or fail (a peer's failure aborts it), drop the
    // queued ones, and report this error rather than any later one.
    std::unique_lock lock(mutex_);
    cancel_ = true;
    wait_until_idle(lock);
    throw;
  }
  std::unique_lock lock(mutex_);
  wait_until_idle(lock);
  if (error_) std::rethrow_exception(error_);
}

void GradientBucketer::on_grad_ready(const Tensor& leaf) {
  const auto found = bucket_of_.find(leaf.impl());
  if (found == bucket_of_.end()) return;  // a leaf of the graph that is not one of ours
  if (pending_[found->second] == 0) return;
  --pending_[found->second];
  launch_ready_buckets();
}

void GradientBucketer::launch_ready_buckets() {
  while (next_to_launch_ < buckets_.size() && pending_[next_to_launch_] == 0) {
    if (in_backward_) ++launched_during_backward_;
    launch(next_to_launch_++);
  }
}

// Packs bucket b's final gradients (zeros for a parameter without one) and queues its
// allreduce. Runs on the compute thread: from here on only the communication thread
// touches these gradients until backward_and_allreduce returns.
void GradientBucketer::launch(size_t b) {
  pending_[b] = 0;
  size_t offset = 0;
  for (size_t i : buckets_[b]) {
    const Tensor& p = params_[i];
    const auto n = static_cast<size_t>(p.numel());
    if (p.grad().defined()) {
      std::memcpy(flat_[b].data() + offset, p.grad().data<float>(), n * sizeof(float));
    } else {
      std::memset(flat_[b].data() + offset, 0, n * sizeof(float));
      p.ensure_grad();
    }
    offset += n;
  }
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(b);
  }
  changed_.notify_all();
}

void GradientBucketer::wait_until_idle(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void GradientBucketer::communication_loop() {
  omp_set_num_threads(1);            // this thread only adds and copies: no OpenMP team
  flush_denormals_on_this_thread();  // the sums must round as on the compute threads
  trace::name_this_thread(lane_.lane, lane_.name);
  for (;;) {
    size_t b = 0;
    float scale = 1.0f;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      b = queue_.front();
      queue_.pop_front();
      if (cancel_ || error_) {  // after an error the remaining buckets are dropped
        changed_.notify_all();
        continue;
      }
      busy_ = true;
      scale = queued_scale_;
    }
    std::exception_ptr error;
    try {
      const trace::Span span(trace::Phase::bucket_allreduce, static_cast<int64_t>(b));
      comm_.allreduce_compressed(rank_, flat_[b].data(), flat_[b].size(), compression_);
      size_t offset = 0;
      for (size_t i : buckets_[b]) {
        const Tensor grad = params_[i].grad();
        float* out = grad.data<float>();
        const auto n = static_cast<size_t>(grad.numel());
        const float* in = flat_[b].data() + offset;
        for (size_t k = 0; k < n; ++k) out[k] = in[k] * scale;
        offset += n;
      }
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      busy_ = false;
      if (error && !error_) error_ = error;
    }
    changed_.notify_all();
  }
}

}  // namespace dpt::parallel
