// Open MPI's hostfile, as `dptrain launch` reads it: one host per line, "NAME [slots=N]"
// (N processes on it, 1 when absent), '#' starting a comment. The launcher writes the
// hosts it keeps back in the same form for mpirun.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace dpt::cli::launch {

struct Host {
  std::string name;
  int slots = 1;
};

// Throws std::runtime_error naming the file (and the line) when it cannot be read, is not
// a regular file (a folder, a pipe, a device), holds a NUL byte (not a text file), names
// no host, or has a line that is not "NAME [slots=N]" with N >= 1 (a control byte in it
// included). The messages quote the file's text through dpt::printable (core/text.h).
std::vector<Host> read_hostfile(const std::filesystem::path& file);

// "NAME slots=N" lines for mpirun --hostfile.
std::string hostfile_text(const std::vector<Host>& hosts);

// The hosts of `hosts` whose name is not in `members`, in their order.
std::vector<Host> hosts_not_in(const std::vector<Host>& hosts, const std::vector<Host>& members);

// The processes of `hosts` together.
int total_slots(const std::vector<Host>& hosts);

// "h1, h2".
std::string host_names(const std::vector<Host>& hosts);

// "h1, h2 (2 processes)".
std::string describe(const std::vector<Host>& hosts);

}  // namespace dpt::cli::launch
