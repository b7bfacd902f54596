#include "dpt/core/random.h"

#include <cmath>
#include <numbers>

namespace dpt {

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double uniform01(Rng& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

void fill_normal(const Tensor& t, float mean, float std, Rng& rng) {
  float* p = t.data<float>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = 1.0 - uniform01(rng);  // in (0, 1]: log(u1) is finite
    const double u2 = uniform01(rng);
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 2.0 * std::numbers::pi * u2;
    p[i] = static_cast<float>(mean + std * radius * std::cos(angle));
    if (i + 1 < n) p[i + 1] = static_cast<float>(mean + std * radius * std::sin(angle));
  }
}

void fill_uniform(const Tensor& t, float low, float high, Rng& rng) {
  float* p = t.data<float>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(low + (high - low) * uniform01(rng));
}

}  // namespace dpt
