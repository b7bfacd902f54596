// Random initialisation that gives the same numbers on every platform and standard
// library: std::normal_distribution is implementation-defined, so replicas and reruns
// would not match across machines. Box-Muller over std::mt19937_64 is fully specified.
#pragma once

#include <cstdint>
#include <random>

#include "dpt/core/tensor.h"

namespace dpt {

using Rng = std::mt19937_64;

// SplitMix64's finaliser: spreads nearby inputs (seed 1 vs 2, epoch 3 vs 4) into unrelated
// values. The one seed mixer of the shuffle, the random transforms and Dropout's masks.
uint64_t mix64(uint64_t x);

// A uniform double in [0, 1) from the top 53 bits of one draw.
double uniform01(Rng& rng);

// Fills an f32 tensor with samples of N(mean, std^2).
void fill_normal(const Tensor& t, float mean, float std, Rng& rng);

// Fills an f32 tensor with samples of U(low, high).
void fill_uniform(const Tensor& t, float low, float high, Rng& rng);

}  // namespace dpt
