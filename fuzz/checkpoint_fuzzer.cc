// libFuzzer target for the checkpoint reader. Each input is decoded twice: as it is
// (exercising the header, length and CRC checks) and with its length and CRC repaired
// (so mutations reach the metadata and tensor parser behind the checksum). Anything but
// success or a CheckpointError is a bug, and a checkpoint that decodes must survive
// encode -> decode unchanged.
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "dpt/checkpoint/checkpoint.h"

namespace {

using dpt::checkpoint::Checkpoint;

constexpr size_t kHeader = 20, kFooter = 4;

void check_round_trip(const Checkpoint& c) {
  const Checkpoint again = dpt::checkpoint::decode(dpt::checkpoint::encode(c), "re-encoded");
  const auto same_tensors = [](const auto& a, const auto& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].name != b[i].name || a[i].shape != b[i].shape || a[i].values.size() != b[i].values.size()) return false;
      if (std::memcmp(a[i].values.data(), b[i].values.data(), a[i].values.size() * sizeof(float)) != 0) return false;
    }
    return true;
  };
  if (again.model != c.model || again.seed != c.seed || again.batch_size != c.batch_size ||
      again.position.global_step != c.position.global_step || again.history.size() != c.history.size() ||
      !same_tensors(again.params, c.params) || !same_tensors(again.buffers, c.buffers) ||
      !same_tensors(again.optimizer_state, c.optimizer_state)) {
    __builtin_trap();
  }
}

void decode(std::span<const uint8_t> bytes) {
  try {
    check_round_trip(dpt::checkpoint::decode(bytes, "fuzz input"));
  } catch (const dpt::checkpoint::CheckpointError&) {
    // Refused with a message: the expected outcome for damaged input.
  }
}

void put_le(uint8_t* at, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) at[i] = static_cast<uint8_t>(value >> (8 * i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  decode({data, size});
  if (size < kHeader + kFooter) return 0;
  std::vector<uint8_t> repaired(data, data + size);
  put_le(&repaired[12], size - kHeader - kFooter, 8);
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), repaired.data(), static_cast<uInt>(size - kFooter));
  put_le(&repaired[size - kFooter], crc, 4);
  decode(repaired);
  return 0;
}
