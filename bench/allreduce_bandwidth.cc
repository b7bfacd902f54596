// Allreduce bandwidth of the in-process backends, naive vs ring, on 2 and 4 devices, for a
// 1 MiB and a 64 MiB buffer: the time for every rank to hold the sum, and the "bus
// bandwidth" NCCL's tests report, 2 (N-1)/N x bytes / time, which makes algorithms and
// device counts comparable (the bytes each rank must move in an optimal allreduce).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "dpt/parallel/communicator.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/device_pool.h"

using namespace dpt;

namespace {
double seconds_per_allreduce(const std::string& algorithm, int devices, size_t bytes) {
  parallel::DevicePool pool(parallel::cpu_devices(devices), devices);
  auto comm = parallel::make_in_process_communicator(algorithm, devices);
  const size_t count = bytes / sizeof(float);
  std::vector<std::vector<float>> buffers(devices, std::vector<float>(count, 1.0f));
  const int iterations = bytes >= (64u << 20) ? 5 : 50;
  pool.run_all([&](int rank) { comm->allreduce_sum(rank, buffers[rank].data(), count); });  // warm-up
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    pool.run_all([&](int rank) { comm->allreduce_sum(rank, buffers[rank].data(), count); });
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iterations;
}
}  // namespace

int main() {
  std::printf("allreduce (sum, float32) between in-process CPU devices on %d cores\n", parallel::available_cores());
  std::printf("%-8s %-7s %-8s %12s %14s %14s\n", "devices", "buffer", "algo", "time (ms)", "algbw (GB/s)",
              "busbw (GB/s)");
  for (int devices : {2, 4}) {
    for (size_t mib : {1u, 64u}) {
      double naive_time = 0;
      for (const char* algorithm : {"naive", "ring"}) {
        const size_t bytes = mib << 20;
        const double t = seconds_per_allreduce(algorithm, devices, bytes);
        if (std::string(algorithm) == "naive") naive_time = t;
        const double algbw = static_cast<double>(bytes) / t / 1e9;
        const double busbw = algbw * 2.0 * (devices - 1) / devices;
        std::printf("%-8d %4zu MiB %-8s %12.3f %14.2f %14.2f\n", devices, mib, algorithm, t * 1e3, algbw, busbw);
        if (std::string(algorithm) == "ring") {
          std::printf("%-8s %-7s %-8s ring is %.2fx the speed of naive\n", "", "", "", naive_time / t);
        }
      }
    }
  }
}
