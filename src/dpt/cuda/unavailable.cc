// A build without the CUDA toolkit: no GPU is usable, and whatever asks for one is told
// why. (CMake compiles this file instead of runtime.cc and ops/cuda/ when nvcc is missing.)
#include <stdexcept>

#include "dpt/cuda/runtime.h"
#include "dpt/ops/backend.h"

namespace dpt::cuda {

namespace {
const char* const kReason = "this dptrain was built without CUDA (" DPT_NO_CUDA_REASON ")";
[[noreturn]] void unavailable() { throw std::runtime_error(kReason); }
}  // namespace

bool built_with_cuda() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return kReason; }
void require_device(Device device) { throw std::invalid_argument(device.str() + ": " + kReason); }
void* allocate(int device, size_t) {
  require_device(Device{Device::Kind::cuda, device});
  unavailable();
}
void release(int, void*, size_t) { unavailable(); }
void copy_to_host(int, void*, const void*, size_t) { unavailable(); }
void copy_from_host(int, void*, const void*, size_t) { unavailable(); }
void copy_on_device(int, void*, const void*, size_t) { unavailable(); }
void copy_between_devices(int, void*, int, const void*, size_t) { unavailable(); }
void fill_zero(int, void*, size_t) { unavailable(); }
void synchronize(int) { unavailable(); }

}  // namespace dpt::cuda

namespace dpt::ops {
const Backend& cuda_backend() { cuda::unavailable(); }
}  // namespace dpt::ops
