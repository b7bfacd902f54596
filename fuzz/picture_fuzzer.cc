// libFuzzer target for the picture decoders (decode_picture: libjpeg-turbo for JPEG,
// stb_image for the rest) and the header reader an image folder runs on every file
// (read_picture_header). The pixel limit is small (kMaxPixels), so that a header declaring
// a huge picture must be refused before decoding instead of exhausting memory. Anything
// but a picture consistent with its size or a DataError is a bug; read_picture_header
// throws nothing.
#include <cstdint>
#include <vector>

#include "dpt/data/data_error.h"
#include "dpt/data/pictures.h"
#include "scratch.h"

namespace {

constexpr int64_t kMaxPixels = int64_t{1} << 22;  // 2048 x 2048

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  try {
    const dpt::data::Picture p = dpt::data::decode_picture(bytes, "'fuzz'", kMaxPixels);
    const int64_t pixels = int64_t{p.width} * p.height;
    if (p.width < 1 || p.height < 1 || p.channels < 1 || p.channels > 4 || pixels > kMaxPixels ||
        p.pixels.size() != static_cast<uint64_t>(pixels * p.channels)) {
      __builtin_trap();  // decoded but inconsistent, or past the limit
    }
  } catch (const dpt::data::DataError&) {
    // Refused with a message: the expected outcome for damaged input or a bomb.
  }
  const dpt::fuzz::TempFile file(data, size, ".img");
  const dpt::data::PictureHeader h = dpt::data::read_picture_header(file.path());
  if (h.channels < 0 || h.channels > 4 || h.width < 0 || h.height < 0) __builtin_trap();
  return 0;
}
