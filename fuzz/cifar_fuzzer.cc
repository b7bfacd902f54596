// libFuzzer target for the CIFAR-10 binary reader (load_cifar, training split). Each input
// becomes a temporary CIFAR-10 folder: batches.meta.txt names 10 classes, the first byte
// picks which of data_batch_1.bin .. data_batch_5.bin holds the rest of the input, and
// the other four hold one valid record each, so every input reaches the record loop of
// its batch. Anything but a data set consistent with the records or a DataError is a bug.
#include <cstdint>
#include <string>
#include <vector>

#include "dpt/data/cifar.h"
#include "dpt/data/data_error.h"
#include "scratch.h"

namespace {

constexpr int64_t kRecord = 1 + 3 * 32 * 32;

// The folder, made once per process; the batches are rewritten for every input.
const std::filesystem::path& cifar_dir() {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path d = dpt::fuzz::scratch_dir() / "cifar";
    std::filesystem::create_directories(d);
    const std::string names = "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n";
    dpt::fuzz::write_file(d / "batches.meta.txt", reinterpret_cast<const uint8_t*>(names.data()), names.size());
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::filesystem::path& dir = cifar_dir();
  const int fuzzed = 1 + data[0] % 5;
  std::vector<uint8_t> one(kRecord, 0x80);
  one[0] = 3;  // "cat"
  for (int b = 1; b <= 5; ++b) {
    const std::filesystem::path file = dir / ("data_batch_" + std::to_string(b) + ".bin");
    if (b == fuzzed) dpt::fuzz::write_file(file, data + 1, size - 1);
    else dpt::fuzz::write_file(file, one.data(), one.size());
  }
  try {
    const dpt::data::InMemoryDataset set = dpt::data::load_cifar(dir, dpt::data::Split::train, dpt::data::CifarLabels::fine);
    const int64_t records = 4 + static_cast<int64_t>(size - 1) / kRecord;
    if (set.size() != records || set.pixels.size() != static_cast<uint64_t>(records * (kRecord - 1)) ||
        set.channels != 3 || set.rows != 32 || set.cols != 32 || set.class_names.size() != 10) {
      __builtin_trap();  // loaded but inconsistent
    }
    for (int64_t label : set.labels) {
      if (label < 0 || label >= 10) __builtin_trap();
    }
  } catch (const dpt::data::DataError&) {
    // Refused with a message: the expected outcome for damaged batches.
  }
  return 0;
}
