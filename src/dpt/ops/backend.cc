#include "dpt/ops/backend.h"

namespace dpt::ops {

const Backend& backend_for(Device device) { return device.kind == Device::Kind::cuda ? cuda_backend() : cpu_backend(); }

}  // namespace dpt::ops
