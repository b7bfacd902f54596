// make_nccl_communicator in a build without CUDA (CMake compiles this file instead of
// nccl_communicator.cc): it says why there is no NCCL, as every other CUDA entry point does.
#include <stdexcept>

#include "dpt/cuda/runtime.h"
#include "dpt/parallel/communicator.h"

namespace dpt::parallel {

std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<Device>&) {
  throw std::runtime_error(cuda::unavailable_reason());
}

}  // namespace dpt::parallel
