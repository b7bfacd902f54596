// Helpers shared by the test suites.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>

#include "dpt/core/random.h"
#include "dpt/core/tensor.h"

namespace dpt::testing_support {

// A tensor of `shape` filled with U(low, high) from `seed`.
inline Tensor random_tensor(const Shape& shape, uint64_t seed, float low = -1.0f, float high = 1.0f) {
  Rng rng(seed);
  Tensor t = Tensor::empty(shape);
  fill_uniform(t, low, high, rng);
  return t;
}

}  // namespace dpt::testing_support

// Expects `statement` to throw std::invalid_argument whose what() contains `text`.
#define EXPECT_INVALID_ARGUMENT(statement, text)             \
  EXPECT_THROW(                                              \
      {                                                      \
        try {                                                \
          statement;                                         \
        } catch (const std::invalid_argument& e) {           \
          EXPECT_THAT(e.what(), ::testing::HasSubstr(text)); \
          throw;                                             \
        }                                                    \
      },                                                     \
      std::invalid_argument)
