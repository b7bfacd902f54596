// bf16 gradient compression (--grad-compression bf16): a float sum whose values cross
// between the ranks as bfloat16, half the bytes of float32. Each rank's values are rounded
// once (to nearest, ties to even), summed in float in rank order by the rank that owns
// their slice, and the sum is rounded once more before it travels back: every rank ends
// with the same bits, which depend on the number of ranks (the roundings happen at rank
// boundaries), so --deterministic refuses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dpt/parallel/communicator.h"

namespace dpt::parallel {

// float -> bfloat16 bits, rounded to nearest even; a NaN stays a NaN.
inline uint16_t to_bf16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// bfloat16 bits -> float (exact).
inline float from_bf16(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value = 0;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

// data[0..count) of every rank ends as the sum over the ranks, the values travelling as
// bfloat16: reduce_scatter_sum then all_gather (sharded_collectives.h), each one alltoall.
// Each rank receives 2 (N-1)/N x count x 2 bytes, half the float ring's. One rank leaves
// data unchanged.
void bf16_allreduce_sum(Communicator& comm, int rank, float* data, size_t count);

}  // namespace dpt::parallel
