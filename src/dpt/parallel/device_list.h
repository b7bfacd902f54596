// Parsing the devices of a training configuration, and the rules for training on them.
//   "cpu:2"            two CPU devices, cpu:0 and cpu:1 (a CPU device is a share of the
//                      machine's cores, so a lone "cpu:N" counts devices)
//   "cpu"              one CPU device
//   "cuda:0,cuda:1"    the GPUs with those indices ("cuda:1" alone is GPU 1); a GPU may be
//                      named more than once ("cuda:0,cuda:0": two replicas on GPU 0)
//   "4"                four devices of the default kind: GPUs where present, else CPUs
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "dpt/core/device.h"
#include "dpt/parallel/communicator.h"

namespace dpt::parallel {

// Throws ConfigError (`devices`) with the accepted forms on malformed text, and when a
// CUDA device is named that this machine or build does not have (`cuda_device_count`).
std::vector<Device> parse_device_list(std::string_view text, int cuda_device_count);

// cpu:0 .. cpu:count-1.
std::vector<Device> cpu_devices(int count);

// Throws ConfigError when `devices` cannot train together: CPU and CUDA devices
// mixed in one list, or CUDA devices with what only the host path has yet (gradient
// buckets: bucket_mb > 0).
void check_devices_for_training(const std::vector<Device>& devices, double bucket_mb);

// Every device (of every process of a job) needs at least one example of each global batch:
// throws ConfigError (`batch_size`) for a batch smaller than the job's devices.
void check_batch_covers_devices(int64_t batch_size, const std::vector<Device>& devices, const ProcessGroup& group);

// Whether some device appears more than once in `devices`.
bool has_repeated_device(const std::vector<Device>& devices);

// The communicator for the devices of one process: NCCL for distinct GPUs, else (CPU
// devices, or a GPU named twice, which NCCL refuses) the in-process `algorithm` ("ring" or
// "naive"), over host memory.
std::unique_ptr<Communicator> make_communicator(const std::vector<Device>& devices, std::string_view algorithm);

}  // namespace dpt::parallel
