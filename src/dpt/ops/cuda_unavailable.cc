// A build without the CUDA toolkit has no CUDA backend: asking for it says why.
#include <stdexcept>

#include "dpt/cuda/runtime.h"
#include "dpt/ops/backend.h"

namespace dpt::ops {
const Backend& cuda_backend() { throw std::runtime_error(cuda::unavailable_reason()); }
}  // namespace dpt::ops
