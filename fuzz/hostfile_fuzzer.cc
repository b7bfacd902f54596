// libFuzzer target for `dptrain launch`'s hostfile reader (read_hostfile): the bytes are
// written to a temporary file; it must either name hosts, each with a non-empty name and
// at least one slot, no name twice, or be refused with a std::runtime_error (as the
// function documents). Another exception or a sanitizer report is a bug.
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>

#include "launch/hostfile.h"
#include "scratch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const dpt::fuzz::TempFile file(data, size, ".hosts");
  try {
    const std::vector<dpt::cli::launch::Host> hosts = dpt::cli::launch::read_hostfile(file.path());
    std::set<std::string> names;
    for (const auto& host : hosts) {
      if (host.name.empty() || host.slots < 1 || !names.insert(host.name).second) __builtin_trap();
    }
    if (hosts.empty() || dpt::cli::launch::total_slots(hosts) < 1) __builtin_trap();
    dpt::cli::launch::describe(hosts);
  } catch (const std::runtime_error&) {
    // Refused with a message naming the file and line: the expected outcome.
  }
  return 0;
}
