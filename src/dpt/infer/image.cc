#include "dpt/infer/image.h"

#include <stb_image.h>
#include <stb_image_resize.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <system_error>

#include "dpt/data/idx.h"

namespace dpt::infer {

namespace {

[[noreturn]] void unreadable(const std::filesystem::path& file, const std::string& reason) {
  throw std::runtime_error("cannot read image " + file.string() + ": " + reason);
}

// An IDX file starts 0x00 0x00 0x08 (unsigned bytes); gzip with 0x1f 0x8b.
bool looks_like_idx(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  unsigned char head[3] = {1, 1, 1};
  in.read(reinterpret_cast<char*>(head), 3);
  if (in.gcount() < 3) return false;
  if (head[0] == 0x1f && head[1] == 0x8b) return true;  // gzip: only IDX files come gzipped here
  return head[0] == 0 && head[1] == 0 && head[2] == 0x08;
}

std::vector<InputImage> idx_images(const std::filesystem::path& file) {
  data::IdxArray idx;
  try {
    idx = data::read_idx(file);
  } catch (const std::exception& e) {
    unreadable(file, e.what());
  }
  if (idx.dims.size() != 3 || idx.dims[1] != kImageSide || idx.dims[2] != kImageSide) {
    unreadable(file, "an IDX images file must hold N x 28 x 28 images");
  }
  constexpr size_t kPixels = kImageSide * kImageSide;
  std::vector<InputImage> out(static_cast<size_t>(idx.dims[0]));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].source = file.filename().string() + "[" + std::to_string(i) + "]";
    out[i].width = out[i].height = kImageSide;
    out[i].pixels.resize(kPixels);
    for (size_t p = 0; p < kPixels; ++p) out[i].pixels[p] = static_cast<float>(idx.values[i * kPixels + p]) / 255.0f;
  }
  return out;
}

}  // namespace

InputImage preprocess(const std::vector<uint8_t>& grey, int width, int height, const std::string& source) {
  if (width < 1 || height < 1 || grey.size() != static_cast<size_t>(width) * static_cast<size_t>(height)) {
    throw std::invalid_argument("preprocess: " + std::to_string(grey.size()) + " pixels for " +
                                std::to_string(width) + "x" + std::to_string(height));
  }
  InputImage out;
  out.source = source;
  out.width = width;
  out.height = height;
  // 2. polarity, from the mean of the border pixels (each counted once).
  double border = 0;
  int64_t count = 0;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      if (y == 0 || y == height - 1 || x == 0 || x == width - 1) {
        border += grey[static_cast<size_t>(y) * width + x];
        ++count;
      }
    }
  }
  out.inverted = border / static_cast<double>(count) > 127.5;
  // 3. square, padded with black on both sides of the shorter one.
  const int side = std::max(width, height);
  std::vector<uint8_t> square(static_cast<size_t>(side) * side, 0);
  const int x0 = (side - width) / 2, y0 = (side - height) / 2;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const uint8_t v = grey[static_cast<size_t>(y) * width + x];
      square[static_cast<size_t>(y + y0) * side + (x + x0)] = out.inverted ? static_cast<uint8_t>(255 - v) : v;
    }
  }
  // 4. resize; 5. scale.
  std::vector<uint8_t> small(kImageSide * kImageSide);
  if (side == kImageSide) {
    small = square;
  } else if (stbir_resize_uint8(square.data(), side, side, 0, small.data(), kImageSide, kImageSide, 0, 1) == 0) {
    throw std::runtime_error("cannot resize image " + source + " to 28x28");
  }
  out.pixels.resize(small.size());
  for (size_t p = 0; p < small.size(); ++p) out.pixels[p] = static_cast<float>(small[p]) / 255.0f;
  return out;
}

std::vector<InputImage> load_images(const std::filesystem::path& file) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error)) {
    unreadable(file, std::filesystem::exists(file, error) ? "not a regular file" : "no such file");
  }
  if (looks_like_idx(file)) return idx_images(file);
  int width = 0, height = 0, channels = 0;
  // 1. grey-scale: stb_image converts to one channel itself.
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(stbi_load(file.c_str(), &width, &height, &channels, 1),
                                                   stbi_image_free);
  if (!pixels) {
    unreadable(file, std::string("not a picture stb_image reads (PNG, PGM, JPEG, BMP, GIF, TGA) nor an IDX images file (") +
                         stbi_failure_reason() + ")");
  }
  const std::vector<uint8_t> grey(pixels.get(), pixels.get() + static_cast<size_t>(width) * height);
  return {preprocess(grey, width, height, file.string())};
}

}  // namespace dpt::infer
