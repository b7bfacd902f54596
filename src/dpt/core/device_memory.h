// Memory and copies on an accelerator, as its runtime provides them. Tensors live on any
// device, but core links no device runtime: the runtime (dpt/cuda) registers its
// implementation here when the program starts, so that core never includes it (the build
// keeps core below every other layer). Host memory needs none of this (core/allocator.h).
#pragma once

#include <cstddef>

#include "dpt/core/device.h"

namespace dpt {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // At least `bytes` on GPU `device`; never null.
  virtual void* allocate(int device, size_t bytes) const = 0;
  virtual void release(int device, void* block, size_t bytes) const = 0;
  // Copies in the device's stream order; copy_to_host returns once the data has arrived.
  virtual void copy_to_host(int device, void* host, const void* src, size_t bytes) const = 0;
  virtual void copy_from_host(int device, void* dst, const void* host, size_t bytes) const = 0;
  virtual void copy_on_device(int device, void* dst, const void* src, size_t bytes) const = 0;
  virtual void copy_between_devices(int dst_device, void* dst, int src_device, const void* src,
                                    size_t bytes) const = 0;
  virtual void fill_zero(int device, void* dst, size_t bytes) const = 0;
};

// Installs the implementation for devices of `kind` (the runtime's, at start-up); it must
// live as long as the program.
void register_device_memory(Device::Kind kind, const DeviceMemory& memory);
// The implementation for `device`'s kind. Throws std::logic_error when no runtime
// registered one (a program that does not link dpt's device runtime).
const DeviceMemory& device_memory(Device device);

}  // namespace dpt
