#include "dpt/core/device.h"

#include <charconv>
#include <stdexcept>

namespace dpt {

std::string Device::str() const {
  return std::string(kind == Kind::cpu ? "cpu" : "cuda") + ":" + std::to_string(index);
}

Device parse_device(std::string_view text) {
  const auto fail = [&] {
    return std::invalid_argument("bad device '" + std::string(text) +
                                 "': expected cpu, cpu:N, cuda or cuda:N with N >= 0");
  };
  const auto colon = text.find(':');
  const std::string_view kind_text = text.substr(0, colon);
  Device device;
  if (kind_text == "cpu") {
    device.kind = Device::Kind::cpu;
  } else if (kind_text == "cuda") {
    device.kind = Device::Kind::cuda;
  } else {
    throw fail();
  }
  if (colon == std::string_view::npos) return device;
  const std::string_view index_text = text.substr(colon + 1);
  const char* end = index_text.data() + index_text.size();
  const auto [ptr, ec] = std::from_chars(index_text.data(), end, device.index);
  if (index_text.empty() || ec != std::errc() || ptr != end || device.index < 0) throw fail();
  return device;
}

std::string device_list_str(const std::vector<Device>& devices) {
  std::string out = "[";
  for (size_t i = 0; i < devices.size(); ++i) {
    if (i) out += ", ";
    out += devices[i].str();
  }
  return out + "]";
}

}  // namespace dpt
