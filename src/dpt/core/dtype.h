// Element types of tensors and of collective buffers: its own header so that code which
// only moves elements (the communicators) need not pull in Tensor.
#pragma once

#include <cstddef>

namespace dpt {

// bf16 is a wire format only: communicators move it (compressed gradients,
// parallel/compression.h); no tensor holds it and no collective reduces it.
enum class DType { f32, i64, bf16 };
size_t dtype_size(DType dtype);       // bytes per element: 4, 8 or 2
const char* dtype_name(DType dtype);  // "float32", "int64", "bfloat16"

}  // namespace dpt
