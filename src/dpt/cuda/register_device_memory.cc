// Hands core the GPU memory functions of runtime.h (or of unavailable.cc, whose every call
// says why this build has no GPU): core reaches device memory only through this hook.
// Linked as a whole archive (see src/CMakeLists.txt): nothing refers to this file, and a
// linker would otherwise drop it.
#include "dpt/core/device_memory.h"
#include "dpt/cuda/runtime.h"

namespace dpt::cuda {
namespace {

class CudaMemory final : public DeviceMemory {
 public:
  void* allocate(int device, size_t bytes) const override { return cuda::allocate(device, bytes); }
  void release(int device, void* block, size_t bytes) const override { cuda::release(device, block, bytes); }
  void copy_to_host(int device, void* host, const void* src, size_t bytes) const override {
    cuda::copy_to_host(device, host, src, bytes);
  }
  void copy_from_host(int device, void* dst, const void* host, size_t bytes) const override {
    cuda::copy_from_host(device, dst, host, bytes);
  }
  void copy_on_device(int device, void* dst, const void* src, size_t bytes) const override {
    cuda::copy_on_device(device, dst, src, bytes);
  }
  void copy_between_devices(int dst_device, void* dst, int src_device, const void* src,
                            size_t bytes) const override {
    cuda::copy_between_devices(dst_device, dst, src_device, src, bytes);
  }
  void fill_zero(int device, void* dst, size_t bytes) const override { cuda::fill_zero(device, dst, bytes); }
};

const CudaMemory kMemory;
const bool kRegistered = (register_device_memory(Device::Kind::cuda, kMemory), true);

}  // namespace
}  // namespace dpt::cuda
