// libFuzzer target for the .npy parser (parse_npy): any bytes must either parse into an
// array whose data size matches its header's shape and dtype or be refused with a
// DataError; a crash, a sanitizer report, another exception (std::out_of_range from a
// number too long, std::bad_alloc, std::length_error) or a runaway allocation is a bug.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "dpt/data/data_error.h"
#include "dpt/data/numpy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);
  try {
    const dpt::data::NpyArray array = dpt::data::parse_npy(bytes, "'fuzz.npy'");
    uint64_t count = 1;
    for (int64_t d : array.shape) {
      if (d < 0) __builtin_trap();  // a negative dimension got through
      count *= static_cast<uint64_t>(d);
    }
    const uint64_t width = std::strtoull(array.dtype.c_str() + 2, nullptr, 10);
    if (array.dtype.size() < 3 || array.data.size() != count * width) __builtin_trap();  // parsed but inconsistent
  } catch (const dpt::data::DataError&) {
    // Refused with a message: the expected outcome for damaged input.
  }
  return 0;
}
