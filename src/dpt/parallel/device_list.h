// Parsing the --devices flag.
//   "cpu:2"            two CPU devices, cpu:0 and cpu:1 (a CPU device is a share of the
//                      machine's cores, so a lone "cpu:N" counts devices)
//   "cpu"              one CPU device
//   "cuda:0,cuda:1"    the GPUs with those indices ("cuda:1" alone is GPU 1)
//   "4"                four devices of the default kind: GPUs where present, else CPUs
#pragma once

#include <string_view>
#include <vector>

#include "dpt/core/device.h"

namespace dpt::parallel {

// Throws std::invalid_argument with the accepted forms on malformed text, and when a
// CUDA device is named that this machine or build does not have (`cuda_device_count`).
std::vector<Device> parse_device_list(std::string_view text, int cuda_device_count);

// cpu:0 .. cpu:count-1.
std::vector<Device> cpu_devices(int count);

}  // namespace dpt::parallel
