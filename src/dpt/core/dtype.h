// Element types of tensors and of collective buffers: its own header so that code which
// only moves elements (the communicators) need not pull in Tensor.
#pragma once

#include <cstddef>

namespace dpt {

enum class DType { f32, i64 };
size_t dtype_size(DType dtype);       // bytes per element: 4 or 8
const char* dtype_name(DType dtype);  // "float32", "int64"

}  // namespace dpt
