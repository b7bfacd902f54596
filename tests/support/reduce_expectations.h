// Inputs and directly computed expectations for allreduce tests of every ReduceOp and
// DType, shared by the in-process tests (tests/parallel_test.cc) and the MPI ones
// (tests/mpi/mpi_collectives_check.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "dpt/core/dtype.h"
#include "dpt/core/random.h"
#include "dpt/parallel/communicator.h"

namespace dpt::testing_support {

// Rank `rank`'s input of `count` elements. f32: multiples of 1/4 in (-1024, 1024), so
// that a sum of up to 8 ranks' values is exact in any order and the expectation needs no
// tolerance. i64: values up to +-2^59 that no float or double holds exactly (so a
// reduction that detours through floating point fails), small enough that 8 never
// overflow.
template <class T>
std::vector<T> reduce_test_input(size_t count, int rank, uint64_t seed) {
  Rng rng(seed * 1000 + static_cast<uint64_t>(rank));
  std::vector<T> values(count);
  for (T& v : values) {
    if constexpr (std::is_same_v<T, float>) {
      v = static_cast<float>(static_cast<int64_t>(rng() % 8192) - 4096) / 4.0f;
    } else {
      v = static_cast<int64_t>(rng() >> 4) - (int64_t{1} << 59) + 1;
    }
  }
  return values;
}

// inputs[0] op inputs[1] op ... elementwise, computed here independently of any backend.
template <class T>
std::vector<T> reduce_serially(const std::vector<std::vector<T>>& inputs, parallel::ReduceOp op) {
  std::vector<T> result = inputs[0];
  for (size_t r = 1; r < inputs.size(); ++r) {
    for (size_t i = 0; i < result.size(); ++i) {
      const T x = inputs[r][i];
      switch (op) {
        case parallel::ReduceOp::sum: result[i] += x; break;
        case parallel::ReduceOp::max: result[i] = std::max(result[i], x); break;
        case parallel::ReduceOp::min: result[i] = std::min(result[i], x); break;
      }
    }
  }
  return result;
}

inline std::string op_type_name(parallel::ReduceOp op, DType type) {
  return std::string(parallel::reduce_op_name(op)) + "_" + dtype_name(type);
}

}  // namespace dpt::testing_support
