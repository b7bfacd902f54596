// The CPU backend's optional fused-kernel layer (ops/fused_kernels.h).
#pragma once

#include "dpt/ops/fused_kernels.h"

namespace dpt::ops::cpu {

const FusedKernels& fused_kernels();

}  // namespace dpt::ops::cpu
