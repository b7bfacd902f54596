// Weight initialization schemes for the weights (tensors of rank >= 2) of a module;
// biases and BatchNorm parameters keep their constructor values (0, and 1 for scales).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "dpt/nn/module.h"

namespace dpt::nn {

enum class Init {
  lesson,   // N(0, 0.01^2), the lesson's init_weights
  kaiming,  // N(0, 2 / fan_in): keeps activation variance through ReLU layers (He et al.)
  xavier,   // U(-a, a), a = sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio)
};

inline constexpr std::array<std::string_view, 3> kInits{"lesson", "kaiming", "xavier"};  // by name

// Parses "lesson", "kaiming" or "xavier"; throws ConfigError (`init`) listing them otherwise.
Init parse_init(std::string_view name);

// Re-initializes every weight of `module` with `scheme`, drawing from `seed`: the same
// seed gives the same weights.
void init_weights(Module& module, Init scheme, uint64_t seed);

}  // namespace dpt::nn
