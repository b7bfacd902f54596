// Shape checks shared by the ops: a wrong shape is a user error, reported with the op's
// name and the shapes involved.
#pragma once

#include <initializer_list>
#include <stdexcept>
#include <string>

#include "dpt/core/tensor.h"

namespace dpt::ops {

inline void require(bool ok, const std::string& op, const std::string& message) {
  if (!ok) throw std::invalid_argument(op + ": " + message);
}

inline void require_f32(const Tensor& t, const std::string& op, const char* what) {
  require(t.defined(), op, std::string(what) + " is undefined");
  require(t.dtype() == DType::f32, op, std::string(what) + " must be float32, got " + dtype_name(t.dtype()));
}

inline void require_rank(const Tensor& t, int rank, const std::string& op, const char* what) {
  require_f32(t, op, what);
  require(t.ndim() == rank, op,
          std::string(what) + " must have " + std::to_string(rank) + " dimensions, got shape " + shape_str(t.shape()));
}

// Every defined tensor of an op lives where the first one does: kernels never reach across
// GPUs. (All cpu:N devices share host memory; they differ only in the thread that computes.)
inline void require_same_device(std::initializer_list<const Tensor*> tensors, const std::string& op) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (!first) {
      first = t;
      continue;
    }
    const bool both_host = t->device().kind == Device::Kind::cpu && first->device().kind == Device::Kind::cpu;
    require(both_host || t->device() == first->device(), op,
            "operands on different devices: " + first->device().str() + " and " + t->device().str() +
                " (move them with Tensor::to first)");
  }
}

}  // namespace dpt::ops
