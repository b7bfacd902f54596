// One long-lived worker thread per device. A worker owns its device for the whole run: the
// replica it computes on, the autograd graphs it builds, its oneDNN stream and primitive
// cache (all thread-local), and its share of the cores: CPU devices split the machine's
// cores between them (OpenMP threads set once per worker), so N devices never
// oversubscribe the machine.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "dpt/core/device.h"
#include "dpt/ops/precision.h"

namespace dpt::parallel {

// The cores this process may run on (its CPU affinity), at least 1.
int available_cores();

class DevicePool {
 public:
  // `cores` is split evenly between the CPU devices (at least one thread each). Every
  // worker computes with `execution` (installed on its thread for its lifetime).
  explicit DevicePool(std::vector<Device> devices, int cores = available_cores(),
                      ops::ExecutionOptions execution = {});
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  int size() const { return static_cast<int>(devices_.size()); }
  const std::vector<Device>& devices() const { return devices_; }
  int threads_per_device() const { return threads_per_device_; }

  // Runs task(rank) on every worker at once and returns when all are done. If tasks throw,
  // the first exception is rethrown here after every worker has finished; the abort hook
  // runs as soon as one throws, so that peers blocked in a collective are released.
  void run_all(const std::function<void(int rank)>& task);
  // Runs task on worker `rank` alone and waits for it.
  void run_on(int rank, const std::function<void()>& task);

  void set_abort_hook(std::function<void()> hook) { abort_hook_ = std::move(hook); }

 private:
  void worker_loop(int rank);
  void dispatch(const std::function<void(int rank)>& task, int only_rank);

  std::vector<Device> devices_;
  int threads_per_device_ = 1;
  ops::ExecutionOptions execution_;
  std::vector<std::thread> threads_;
  std::function<void()> abort_hook_;

  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int)>* task_ = nullptr;
  int only_rank_ = -1;            // -1: every worker runs the task
  unsigned long generation_ = 0;  // bumped for each dispatch; workers run each one once
  int pending_ = 0;
  std::exception_ptr first_error_;
  bool stopping_ = false;
};

}  // namespace dpt::parallel
