#include "dpt/parallel/device_pool.h"

#include <omp.h>
#include <sched.h>

#include <stdexcept>

#include "dpt/core/denormals.h"
#include "dpt/core/trace.h"

namespace dpt::parallel {

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

DevicePool::DevicePool(std::vector<Device> devices, int cores, ops::ExecutionOptions execution)
    : devices_(std::move(devices)), execution_(execution) {
  ops::check_execution(execution_);
  if (devices_.empty()) throw std::invalid_argument("DevicePool: no devices");
  int cpu_devices = 0;
  for (const Device& d : devices_) cpu_devices += d.kind == Device::Kind::cpu;
  threads_per_device_ = cpu_devices == 0 ? 1 : std::max(1, cores / cpu_devices);
  for (int rank = 0; rank < size(); ++rank) threads_.emplace_back([this, rank] { worker_loop(rank); });
}

DevicePool::~DevicePool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void DevicePool::worker_loop(int rank) {
  // Set once: every oneDNN call this thread makes runs on this many OpenMP threads.
  omp_set_num_threads(threads_per_device_);
  flush_denormals_on_this_thread();
  const ops::ExecutionScope run_options(execution_);  // the run's precision, algorithm, fusion
  trace::name_this_thread(trace::device_lane(rank), devices_[static_cast<size_t>(rank)].str());
  unsigned long seen = 0;
  for (;;) {
    const std::function<void(int)>* task = nullptr;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      if (only_rank_ >= 0 && only_rank_ != rank) continue;
      task = task_;
    }
    std::exception_ptr error;
    try {
      (*task)(rank);
    } catch (...) {
      error = std::current_exception();
    }
    bool first = false;
    if (error) {
      std::lock_guard lock(mutex_);
      if (!first_error_) {
        first_error_ = error;
        first = true;
      }
    }
    // The hook runs before this worker counts as done: once pending_ reaches 0, run_all may
    // return and its caller destroy what the hook touches (ScratchTrainer's communicator).
    if (first && abort_hook_) abort_hook_();
    {
      std::lock_guard lock(mutex_);
      // Drop this worker's reference to its exception before the caller may wake: the
      // exception (and its message string) then dies on whichever thread holds the last
      // reference after this lock, never racing with the caller reading it. (libstdc++'s
      // reference counts are atomics ThreadSanitizer cannot see.)
      error = nullptr;
      --pending_;
    }
    work_done_.notify_all();
  }
}

void DevicePool::dispatch(const std::function<void(int rank)>& task, int only_rank) {
  std::exception_ptr error;
  {
    std::unique_lock lock(mutex_);
    task_ = &task;
    only_rank_ = only_rank;
    pending_ = only_rank >= 0 ? 1 : size();
    first_error_ = nullptr;
    ++generation_;
    work_ready_.notify_all();
    work_done_.wait(lock, [&] { return pending_ == 0; });
    error = first_error_;
    task_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

void DevicePool::run_all(const std::function<void(int rank)>& task) { dispatch(task, -1); }

void DevicePool::run_on(int rank, const std::function<void()>& task) {
  if (rank < 0 || rank >= size()) throw std::out_of_range("DevicePool::run_on: no worker " + std::to_string(rank));
  dispatch([&](int) { task(); }, rank);
}

}  // namespace dpt::parallel
