#include "dpt/infer/image.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "dpt/data/data_error.h"
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

// Step 4: v / 255, then the recorded normalization.
std::vector<float> scaled(const uint8_t* chw, const data::DataInfo& data) {
  const ImageShape& s = data.shape;
  std::vector<float> out(static_cast<size_t>(s.numel()));
  const int64_t plane = s.height * s.width;
  for (int64_t c = 0; c < s.channels; ++c) {
    const float mean = data.mean.empty() ? 0.0f : data.mean[static_cast<size_t>(c)];
    const float inv = data.stddev.empty() ? 1.0f : 1.0f / data.stddev[static_cast<size_t>(c)];
    for (int64_t p = c * plane; p < (c + 1) * plane; ++p) out[static_cast<size_t>(p)] = (static_cast<float>(chw[p]) / 255.0f - mean) * inv;
  }
  return out;
}

std::vector<InputImage> idx_images(const std::filesystem::path& file, const data::DataInfo& data) {
  data::IdxArray idx;
  try {
    idx = data::read_idx(file);
  } catch (const std::exception& e) {
    unreadable(file, e.what());
  }
  const ImageShape& s = data.shape;
  if (idx.dims.size() != 3 || s.channels != 1 || idx.dims[1] != s.height || idx.dims[2] != s.width) {
    unreadable(file, "an IDX images file must hold N x " + std::to_string(s.height) + " x " + std::to_string(s.width) +
                         " grey images, the shape this model was trained on (" + s.str() + ")");
  }
  const size_t pixels = static_cast<size_t>(s.height * s.width);
  std::vector<InputImage> out(static_cast<size_t>(idx.dims[0]));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].source = file.filename().string() + "[" + std::to_string(i) + "]";
    out[i].width = static_cast<int>(s.width);
    out[i].height = static_cast<int>(s.height);
    out[i].pixels = scaled(idx.values.data() + i * pixels, data);
  }
  return out;
}

// Step 2: inverted when the border is bright, then padded to a square with black.
data::Picture light_on_dark_square(const data::Picture& grey, bool& inverted) {
  const int width = grey.width, height = grey.height;
  double border = 0;
  int64_t count = 0;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      if (y == 0 || y == height - 1 || x == 0 || x == width - 1) {
        border += grey.pixels[static_cast<size_t>(y) * width + x];
        ++count;
      }
    }
  }
  inverted = border / static_cast<double>(count) > 127.5;
  const int side = std::max(width, height);
  data::Picture square{side, side, 1, std::vector<uint8_t>(static_cast<size_t>(side) * side, 0)};
  const int x0 = (side - width) / 2, y0 = (side - height) / 2;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const uint8_t v = grey.pixels[static_cast<size_t>(y) * width + x];
      square.pixels[static_cast<size_t>(y + y0) * side + (x + x0)] = inverted ? static_cast<uint8_t>(255 - v) : v;
    }
  }
  return square;
}

}  // namespace

InputImage preprocess(const data::Picture& picture, const data::DataInfo& data, const std::string& source) {
  if (picture.width < 1 || picture.height < 1 ||
      picture.pixels.size() != static_cast<size_t>(picture.width) * picture.height * picture.channels) {
    throw std::invalid_argument("preprocess: " + std::to_string(picture.pixels.size()) + " bytes for a " +
                                std::to_string(picture.width) + "x" + std::to_string(picture.height) + " picture of " +
                                std::to_string(picture.channels) + " channels");
  }
  const ImageShape& s = data.shape;
  InputImage out;
  out.source = source;
  out.width = picture.width;
  out.height = picture.height;
  data::Picture p = data::with_channels(picture, static_cast<int>(s.channels));
  if (data.light_on_dark && s.channels == 1) p = light_on_dark_square(p, out.inverted);
  p = data::resized(std::move(p), static_cast<int>(s.width), static_cast<int>(s.height));
  std::vector<uint8_t> chw(static_cast<size_t>(s.numel()));
  data::to_chw(p, chw.data());
  out.pixels = scaled(chw.data(), data);
  return out;
}

std::vector<InputImage> load_images(const std::filesystem::path& file, const data::DataInfo& data, int64_t max_pixels) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error)) {
    unreadable(file, std::filesystem::exists(file, error) ? "not a regular file" : "no such file");
  }
  if (looks_like_idx(file)) return idx_images(file, data);
  // A size past the limit is its own message (with the setting that raises it), before decoding.
  const data::PictureHeader header = data::read_picture_header(file);
  if (header.channels == 0) unreadable(file, "not a picture (JPEG, PNG, PGM, BMP, GIF, TGA) nor an IDX images file");
  data::check_picture_size(header, data::in_quotes(file), max_pixels);
  data::Picture picture;
  try {
    picture = data::decode_picture(data::read_file(file), file.string(), max_pixels);
  } catch (const std::exception& e) {
    std::string why = e.what();  // "cannot decode picture FILE: REASON": the file is named already
    const std::string prefix = "cannot decode picture " + file.string() + ": ";
    if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
    unreadable(file, "not a picture (JPEG, PNG, PGM, BMP, GIF, TGA) nor an IDX images file (" + why + ")");
  }
  return {preprocess(picture, data, file.string())};
}

}  // namespace dpt::infer
