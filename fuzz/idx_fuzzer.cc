// libFuzzer target for the IDX reader: any bytes, gzip-compressed or plain, must either
// parse into an array whose size matches its header or be refused with a DataError;
// a crash, a sanitizer report, another exception or a runaway allocation is a bug.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "dpt/data/data_error.h"
#include "dpt/data/idx.h"

namespace {

// read_idx reads files (through zlib's gz* API), so each input is written to one
// temporary file per fuzzing process.
const std::string& scratch_file() {
  // /dev/shm keeps the per-input write in memory, where it exists.
  static const std::string dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  static const std::string path = dir + "/dpt_idx_fuzz_" + std::to_string(::getpid()) + ".idx";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(scratch_file().c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    const dpt::data::IdxArray array = dpt::data::read_idx(scratch_file());
    uint64_t expected = 1;
    for (int64_t d : array.dims) expected *= static_cast<uint64_t>(d);
    if (array.dims.empty() || array.values.size() != expected) __builtin_trap();  // parsed but inconsistent
  } catch (const dpt::data::DataError&) {
    // Refused with a message: the expected outcome for damaged input.
  }
  return 0;
}
