// ImageShape: the channels, height and width of one example image. Data sets report it,
// models size their layers from it, and checkpoints record it, so that evaluate, predict
// and export rebuild exactly the network that was trained.
#pragma once

#include <cstdint>
#include <string>

namespace dpt {

struct ImageShape {
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;

  int64_t numel() const { return channels * height * width; }
  bool operator==(const ImageShape&) const = default;
  // "3x32x32" (channels x height x width)
  std::string str() const {
    return std::to_string(channels) + "x" + std::to_string(height) + "x" + std::to_string(width);
  }
};

}  // namespace dpt
