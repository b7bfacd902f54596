// Test data for the summation-order tests (chunk_tree_test, parallel_tree_allreduce_test).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace dpt::testing {

// `chunks` vectors of `width` values of very different magnitudes (2^-12 to 2^12), so that
// summing them in another order changes bits.
inline std::vector<std::vector<float>> order_sensitive_values(int64_t chunks, size_t width, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<std::vector<float>> values(static_cast<size_t>(chunks), std::vector<float>(width));
  for (auto& chunk : values) {
    for (float& v : chunk) v = std::ldexp(mantissa(rng), exponent(rng));
  }
  return values;
}

}  // namespace dpt::testing
