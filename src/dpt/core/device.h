// A device names where a tensor lives and which worker computes on it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dpt {

struct Device {
  enum class Kind { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;

  static Device cpu(int index = 0) { return {Kind::cpu, index}; }
  std::string str() const;  // "cpu:0", "cuda:1"
  friend bool operator==(const Device&, const Device&) = default;
};

// Parses one device, "cpu", "cpu:1" or "cuda:0". Throws std::invalid_argument with the
// accepted forms when the text is neither.
Device parse_device(std::string_view text);

// "[cpu:0, cpu:1]", the form the lesson prints after the timing.
std::string device_list_str(const std::vector<Device>& devices);

}  // namespace dpt
