#include "launch/hostfile.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "dpt/core/text.h"

namespace dpt::cli::launch {

namespace {

// The most processes one host or the whole file may have: the total stays an int.
constexpr int kMaxSlots = 100000;
constexpr int64_t kMaxProcesses = 1000000;

// N of "slots=N", or 0 when the word is not that form or N is past kMaxSlots.
int parse_slots(const std::string& word) {
  const std::string prefix = "slots=";
  if (word.rfind(prefix, 0) != 0 || word.size() == prefix.size()) return 0;
  int slots = 0;
  for (size_t i = prefix.size(); i < word.size(); ++i) {
    if (word[i] < '0' || word[i] > '9') return 0;
    slots = slots * 10 + (word[i] - '0');
    if (slots > kMaxSlots) return 0;
  }
  return slots;
}

// What a hostfile is, for the refusals of what is not one.
const char* const kWhatToPass = "pass the path of a hostfile: one \"HOST [slots=N]\" per line";

// A control byte other than the whitespace between words (tab, CR, VT, FF).
bool has_control_byte(const std::string& line) {
  return std::any_of(line.begin(), line.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return (byte < 0x20 && !std::isspace(byte)) || byte == 0x7f;
  });
}

// Refuses what is there but is not a regular file (followed through links): a folder reads
// as empty, a pipe (<(...)) or a device cannot be read again after a failure, a FIFO
// without a writer blocks. What is not there, or not reachable, is left to the reading.
void check_regular(const std::filesystem::path& file) {
  std::error_code ec;
  const std::filesystem::file_type type = std::filesystem::status(file, ec).type();
  if (ec || type == std::filesystem::file_type::regular) return;
  const std::string name = "hostfile " + file.string();
  if (type == std::filesystem::file_type::directory) {
    throw std::runtime_error(name + " is a folder; " + kWhatToPass);
  }
  const char* what = "not a file";
  switch (type) {
    case std::filesystem::file_type::fifo:
      what = "a pipe: it reads once, and the launcher reads the hostfile again after a failure";
      break;
    case std::filesystem::file_type::character: what = "a character device"; break;
    case std::filesystem::file_type::block: what = "a block device"; break;
    case std::filesystem::file_type::socket: what = "a socket"; break;
    default: break;
  }
  throw std::runtime_error(name + " is not a regular file (" + what + "); " + kWhatToPass);
}

}  // namespace

std::vector<Host> read_hostfile(const std::filesystem::path& file) {
  check_regular(file);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read hostfile " + file.string() + ": " + std::strerror(errno));
  errno = 0;
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw std::runtime_error("cannot read hostfile " + file.string() + ": " + std::strerror(errno));
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n');
    throw std::runtime_error("hostfile " + file.string() + " is not a text file (a NUL byte on line " +
                             std::to_string(line) + "); " + kWhatToPass);
  }
  std::istringstream in_text(text);
  std::vector<Host> hosts;
  int64_t total = 0;
  std::string line;
  for (int number = 1; std::getline(in_text, line); ++number) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    Host host;
    if (!(words >> host.name)) continue;  // blank or a comment
    std::string word;
    const auto bad = [&] {
      return std::runtime_error("hostfile " + file.string() + " line " + std::to_string(number) + ": expected "
                                "\"HOST\" or \"HOST slots=N\" (N >= 1), got \"" + printable(line) + "\"");
    };
    if (has_control_byte(line)) throw bad();
    if (words >> word) {
      host.slots = parse_slots(word);
      if (host.slots < 1 || (words >> word)) throw bad();
    }
    for (const Host& seen : hosts) {
      if (seen.name == host.name) {
        throw std::runtime_error("hostfile " + file.string() + " line " + std::to_string(number) + ": host " +
                                 host.name + " is listed twice; give it one line with its slots");
      }
    }
    hosts.push_back(host);
    total += host.slots;
    if (total > kMaxProcesses) {
      throw std::runtime_error("hostfile " + file.string() + " line " + std::to_string(number) + ": more than " +
                               std::to_string(kMaxProcesses) + " processes in all; it is not a hostfile of real hosts");
    }
  }
  if (hosts.empty()) throw std::runtime_error("hostfile " + file.string() + " names no host");
  return hosts;
}

std::string hostfile_text(const std::vector<Host>& hosts) {
  std::string text;
  for (const Host& host : hosts) text += host.name + " slots=" + std::to_string(host.slots) + "\n";
  return text;
}

std::vector<Host> hosts_not_in(const std::vector<Host>& hosts, const std::vector<Host>& members) {
  std::vector<Host> rest;
  for (const Host& host : hosts) {
    if (std::none_of(members.begin(), members.end(), [&](const Host& m) { return m.name == host.name; }))
      rest.push_back(host);
  }
  return rest;
}

int total_slots(const std::vector<Host>& hosts) {
  int total = 0;
  for (const Host& host : hosts) total += host.slots;
  return total;
}

std::string host_names(const std::vector<Host>& hosts) {
  std::string names;
  for (const Host& host : hosts) names += (names.empty() ? "" : ", ") + host.name;
  return names;
}

std::string describe(const std::vector<Host>& hosts) {
  const int processes = total_slots(hosts);
  return host_names(hosts) + " (" + std::to_string(processes) + " process" + (processes == 1 ? "" : "es") + ")";
}

}  // namespace dpt::cli::launch
