#include "launch/hostfile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace dpt::cli::launch {

namespace {

// N of "slots=N", or 0 when the word is not that form.
int parse_slots(const std::string& word) {
  const std::string prefix = "slots=";
  if (word.rfind(prefix, 0) != 0 || word.size() == prefix.size()) return 0;
  int slots = 0;
  for (size_t i = prefix.size(); i < word.size(); ++i) {
    if (word[i] < '0' || word[i] > '9' || slots > 100000) return 0;
    slots = slots * 10 + (word[i] - '0');
  }
  return slots;
}

}  // namespace

std::vector<Host> read_hostfile(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read hostfile " + file.string() + ": " + std::strerror(errno));
  std::vector<Host> hosts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    Host host;
    if (!(words >> host.name)) continue;  // blank or a comment
    std::string word;
    const auto bad = [&] {
      return std::runtime_error("hostfile " + file.string() + " line " + std::to_string(number) + ": expected "
                                "\"HOST\" or \"HOST slots=N\" (N >= 1), got \"" + line + "\"");
    };
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
