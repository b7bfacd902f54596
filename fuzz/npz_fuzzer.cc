// libFuzzer target for the .npz reader: the bytes are written to a temporary .npz file,
// read as an archive of .npy arrays (read_npz, libzip), and loaded as a training split
// (load_numpy: the arrays' dtypes, ranks and lengths checked, images and labels
// converted). Anything but success or a DataError is a bug.
#include <cstdint>

#include "dpt/data/data_error.h"
#include "dpt/data/numpy.h"
#include "scratch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const dpt::fuzz::TempFile file(data, size, ".npz");
  try {
    dpt::data::read_npz(file.path());
  } catch (const dpt::data::DataError&) {
    // Refused with a message: the expected outcome for damaged input.
  }
  try {
    const dpt::data::InMemoryDataset set = dpt::data::load_numpy(file.path(), dpt::data::Split::train);
    const int64_t image = set.channels * set.rows * set.cols;
    const uint64_t held = set.pixels.empty() ? set.values.size() : set.pixels.size();
    if (held != static_cast<uint64_t>(set.size() * image) || (set.class_names.empty() && set.size() > 0)) {
      __builtin_trap();  // loaded but inconsistent
    }
    for (int64_t label : set.labels) {
      if (label < 0 || label >= static_cast<int64_t>(set.class_names.size())) __builtin_trap();
    }
  } catch (const dpt::data::DataError&) {
  }
  return 0;
}
