// Helpers shared by the test suites.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "dpt/core/random.h"
#include "dpt/core/tensor.h"

namespace dpt::testing_support {

// Whether this build runs under ThreadSanitizer (much slower: tests shrink or wait longer).
#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

// A tensor of `shape` filled with U(low, high) from `seed`.
inline Tensor random_tensor(const Shape& shape, uint64_t seed, float low = -1.0f, float high = 1.0f) {
  Rng rng(seed);
  Tensor t = Tensor::empty(shape);
  fill_uniform(t, low, high, rng);
  return t;
}

// The message of the `Error` that f() throws, or "<no error>" when it throws none (any
// other exception escapes and fails the test).
template <class Error = std::exception>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
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
