// libFuzzer target for the checkpoint's JSON metadata (read_metadata, behind decode): the
// input is the metadata of an otherwise valid version-1 checkpoint (header, body length,
// two fixed tensors and CRC-32 built around it), so every input gets past the checks that
// stop most of checkpoint_fuzzer's mutations. Anything but success or a CheckpointError is
// a bug (an nlohmann::json exception escaping, std::out_of_range, a sanitizer report), and
// a checkpoint that decodes must survive encode -> decode.
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dpt/checkpoint/checkpoint.h"

namespace {

void put(std::vector<uint8_t>& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

void put_tensor(std::vector<uint8_t>& out, const std::string& name, const std::vector<int64_t>& shape,
                const std::vector<float>& values) {
  put(out, name.size(), 4);
  out.insert(out.end(), name.begin(), name.end());
  put(out, shape.size(), 4);
  for (int64_t d : shape) put(out, static_cast<uint64_t>(d), 8);
  for (float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    put(out, bits, 4);
  }
}

// "DPTCKPT\n" u32 version, u64 body_bytes, body, u32 crc32 (checkpoint.h's format).
std::vector<uint8_t> container(const uint8_t* meta, size_t size) {
  std::vector<uint8_t> body;
  put(body, size, 8);
  body.insert(body.end(), meta, meta + size);
  put(body, 2, 4);
  put_tensor(body, "param/W1", {2, 2}, {0.5f, -1.0f, 2.0f, 0.0f});
  put_tensor(body, "param/b1", {2}, {0.1f, 0.2f});
  std::vector<uint8_t> file = {'D', 'P', 'T', 'C', 'K', 'P', 'T', '\n'};
  put(file, dpt::checkpoint::kFormatVersion, 4);
  put(file, body.size(), 8);
  file.insert(file.end(), body.begin(), body.end());
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), file.data(), static_cast<uInt>(file.size()));
  put(file, crc, 4);
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> file = container(data, size);
  dpt::checkpoint::Checkpoint c;
  try {
    c = dpt::checkpoint::decode(file, "'fuzz.ckpt'");
  } catch (const dpt::checkpoint::CheckpointError&) {
    return 0;  // refused with a message: the expected outcome for damaged metadata
  }
  if (c.params.size() != 2 || c.batch_size < 1 || c.data.classes.empty()) __builtin_trap();
  // Decoded: writing it again must give a checkpoint that decodes to the same metadata.
  const dpt::checkpoint::Checkpoint again = dpt::checkpoint::decode(dpt::checkpoint::encode(c), "re-encoded");
  if (again.model != c.model || again.seed != c.seed || again.batch_size != c.batch_size ||
      again.train_examples != c.train_examples || again.devices != c.devices || again.data.classes != c.data.classes ||
      again.data.shape != c.data.shape || again.position.global_step != c.position.global_step ||
      again.optimizer != c.optimizer || again.history.size() != c.history.size()) {
    __builtin_trap();
  }
  return 0;
}
