// What the rest of dptrain needs from CUDA, without including any CUDA header: whether
// GPUs are usable here, device memory, and copies. runtime.cc implements it over the CUDA
// runtime when CMake found the toolkit; unavailable.cc otherwise, where every use says the
// build has no CUDA. All work on one device goes to that device's one stream (context.h),
// so device memory freed in stream order may be handed out again at once.
#pragma once

#include <cstddef>
#include <string>

#include "dpt/core/device.h"

namespace dpt::cuda {

bool built_with_cuda();
// GPUs the driver shows: 0 in a build without CUDA, without a driver, or without a GPU.
int device_count();
// Why no GPU can be used here ("built without CUDA ...", or what the CUDA runtime said);
// empty when device_count() > 0.
std::string unavailable_reason();
// Throws std::invalid_argument naming `device` (cuda:N) and the reason when it cannot be
// used here: no CUDA in this build, no GPU, or N beyond the GPUs there are.
void require_device(Device device);

// Device memory of at least `bytes` on GPU `device`, from a per-device cache of freed
// blocks (cudaMalloc only when the cache has none of that size). Never null.
void* allocate(int device, size_t bytes);
void release(int device, void* block, size_t bytes);

// Copies in the device's stream order. copy_to_host waits until the data has arrived.
// copy_from_host returns at once: the bytes are staged in pinned host memory (two buffers
// per GPU, taking turns), from which the GPU copies at full speed when the stream reaches
// the copy, while the host goes on queueing work; `host` may be reused at once.
void copy_to_host(int device, void* host, const void* src, size_t bytes);
void copy_from_host(int device, void* dst, const void* host, size_t bytes);
void copy_on_device(int device, void* dst, const void* src, size_t bytes);
void copy_between_devices(int dst_device, void* dst, int src_device, const void* src, size_t bytes);
void fill_zero(int device, void* dst, size_t bytes);
// Waits until everything queued on the device's stream has run.
void synchronize(int device);

}  // namespace dpt::cuda
