#include "dpt/core/device_memory.h"

#include <array>
#include <atomic>
#include <stdexcept>

namespace dpt {

namespace {
constexpr size_t kKinds = static_cast<size_t>(Device::Kind::cuda) + 1;

// Written once per kind before main (static registration), read by every thread after.
std::array<std::atomic<const DeviceMemory*>, kKinds>& registry() {
  static std::array<std::atomic<const DeviceMemory*>, kKinds> memories{};
  return memories;
}
}  // namespace

void register_device_memory(Device::Kind kind, const DeviceMemory& memory) {
  registry()[static_cast<size_t>(kind)].store(&memory);
}

const DeviceMemory& device_memory(Device device) {
  const DeviceMemory* memory = registry()[static_cast<size_t>(device.kind)].load();
  if (memory == nullptr) {
    throw std::logic_error("memory on " + device.str() +
                           " needs a device runtime, and this program registered none: link the dpt_cuda library");
  }
  return *memory;
}

}  // namespace dpt
