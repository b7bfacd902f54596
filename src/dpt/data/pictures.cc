#include "dpt/data/pictures.h"

#include <stb_image.h>
#include <stb_image_resize.h>
#include <turbojpeg.h>

#include <algorithm>
#include <climits>
#include <string_view>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "dpt/data/data_error.h"

namespace dpt::data {
namespace {

bool is_jpeg(const std::vector<uint8_t>& bytes) { return bytes.size() > 3 && bytes[0] == 0xFF && bytes[1] == 0xD8; }

// Bytes that start like a JPEG marker but not with its SOI: stb_image skips the fill bytes
// and parses them as JPEG, where Debian's stb_image (2022) overruns a Huffman table on a
// crafted DHT. No picture format starts so, so they are refused before stb_image sees them.
bool looks_like_mangled_jpeg(const std::vector<uint8_t>& bytes) { return !bytes.empty() && bytes[0] == 0xFF && !is_jpeg(bytes); }

[[noreturn]] void undecodable(const std::string& source, const std::string& reason) {
  throw DataError("cannot decode picture " + source + ": " + reason);
}

// libjpeg-turbo's decompressor; one per thread, since a handle is not shared between threads.
tjhandle jpeg_decoder() {
  struct Handle {
    tjhandle h = tjInitDecompress();
    ~Handle() {
      if (h) tjDestroy(h);
    }
  };
  thread_local Handle handle;
  if (!handle.h) throw std::runtime_error("libjpeg-turbo: cannot create a decompressor");
  return handle.h;
}

// The format the first bytes name, for messages: a damaged PNG is "damaged PNG data", not
// whatever the last decoder stb_image tried had to say.
std::string format_of(const std::vector<uint8_t>& bytes) {
  const auto starts = [&](std::string_view magic) {
    return bytes.size() >= magic.size() && std::equal(magic.begin(), magic.end(), bytes.begin(),
                                                      [](char m, uint8_t b) { return static_cast<uint8_t>(m) == b; });
  };
  if (is_jpeg(bytes)) return "JPEG";
  if (starts("\x89PNG\r\n\x1a\n")) return "PNG";
  if (starts("BM")) return "BMP";
  if (starts("GIF8")) return "GIF";
  return "";
}

// What the header declares, without decoding: {channels, size}; channels 0 when neither
// decoder reads the header.
PictureHeader header_of(const std::vector<uint8_t>& head) {
  PictureHeader h;
  if (looks_like_mangled_jpeg(head)) return h;
  if (is_jpeg(head)) {
    int width = 0, height = 0, subsampling = 0, colorspace = 0;
    if (tjDecompressHeader3(jpeg_decoder(), head.data(), static_cast<unsigned long>(head.size()), &width, &height,
                            &subsampling, &colorspace) != 0) {
      return h;
    }
    if (width < 1 || height < 1) return h;
    h.channels = colorspace == TJCS_GRAY ? 1 : 3;
    h.width = width, h.height = height;
    return h;
  }
  int width = 0, height = 0, channels = 0;
  if (head.size() > static_cast<size_t>(INT_MAX) ||
      !stbi_info_from_memory(head.data(), static_cast<int>(head.size()), &width, &height, &channels)) {
    return h;
  }
  // A size below 1 (a BMP may declare a negative one, a PNM 0) is no picture to decode.
  if (width < 1 || height < 1) return h;
  h.channels = channels;
  h.width = width, h.height = height;
  return h;
}

[[noreturn]] void damaged(const std::vector<uint8_t>& bytes, const std::string& source, const std::string& decoder) {
  const std::string format = format_of(bytes);
  undecodable(source, (format.empty() ? "its data is damaged or in a format dptrain does not read"
                                      : "its " + format + " data is damaged") +
                          " (" + decoder + ")");
}

Picture decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& source, const PictureHeader& h) {
  tjhandle tj = jpeg_decoder();
  Picture p;
  p.width = static_cast<int>(h.width);
  p.height = static_cast<int>(h.height);
  p.channels = h.channels;
  p.pixels.resize(static_cast<size_t>(p.width) * p.height * p.channels);
  if (tjDecompress2(tj, bytes.data(), static_cast<unsigned long>(bytes.size()), p.pixels.data(), p.width, 0, p.height,
                    p.channels == 1 ? TJPF_GRAY : TJPF_RGB, TJFLAG_ACCURATEDCT) != 0 &&
      tjGetErrorCode(tj) == TJERR_FATAL) {
    damaged(bytes, source, std::string("libjpeg-turbo: ") + tjGetErrorStr2(tj));
  }
  return p;
}

Picture decode_stb(const std::vector<uint8_t>& bytes, const std::string& source) {
  int width = 0, height = 0, channels = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &width, &height, &channels, 0),
      stbi_image_free);
  if (!pixels) damaged(bytes, source, std::string("stb_image: ") + stbi_failure_reason());
  if (width < 1 || height < 1) damaged(bytes, source, "stb_image: a size of " + std::to_string(width) + "x" + std::to_string(height));
  Picture p;
  p.width = width;
  p.height = height;
  p.channels = channels;
  p.pixels.assign(pixels.get(), pixels.get() + static_cast<size_t>(width) * height * channels);
  return p;
}

}  // namespace

std::vector<uint8_t> read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) throw DataError("cannot open '" + file.string() + "'; check that it exists and is readable");
  const std::streamsize size = in.tellg();
  std::vector<uint8_t> bytes(static_cast<size_t>(size > 0 ? size : 0));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), size)) {
    throw DataError("cannot read '" + file.string() + "'; check that it is readable");
  }
  return bytes;
}

void check_picture_size(const PictureHeader& header, const std::string& source, int64_t max_pixels) {
  // Both sides are below 2^31 (the decoders' int), so the product cannot overflow.
  const int64_t pixels = header.width * header.height;
  if (pixels <= max_pixels) return;
  throw DataError("picture " + source + " declares " + std::to_string(header.width) + "x" + std::to_string(header.height) +
                  " pixels (" + std::to_string(pixels) + "), more than the limit of " + std::to_string(max_pixels) +
                  " (`max_image_pixels`): a damaged header or a decompression bomb; if the picture is real, raise "
                  "`max_image_pixels`");
}

Picture decode_picture(const std::vector<uint8_t>& bytes, const std::string& source, int64_t max_pixels) {
  if (bytes.empty()) undecodable(source, "the file is empty");
  const PictureHeader header = header_of(bytes);
  if (header.channels == 0) {
    const std::string format = format_of(bytes);
    undecodable(source, format.empty() ? "it is not a picture dptrain reads (JPEG, PNG, BMP, GIF, TGA, PNM)"
                                       : "its " + format + " header is damaged");
  }
  check_picture_size(header, source, max_pixels);
  return is_jpeg(bytes) ? decode_jpeg(bytes, source, header) : decode_stb(bytes, source);
}

namespace {

bool ends_whole(const std::vector<uint8_t>& head, const std::vector<uint8_t>& tail) {
  static constexpr uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (head.size() >= 8 && std::equal(head.begin(), head.begin() + 8, png_signature)) {
    static constexpr uint8_t iend[8] = {'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};  // type and CRC
    return tail.size() >= 8 && std::equal(tail.end() - 8, tail.end(), iend);
  }
  if (is_jpeg(head)) {
    for (size_t i = 0; i + 1 < tail.size(); ++i) {
      if (tail[i] == 0xFF && tail[i + 1] == 0xD9) return true;
    }
    return false;
  }
  return true;
}

}  // namespace

PictureHeader read_picture_header(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  const std::streamoff size = in.tellg();
  if (!in || size <= 0) return {};
  std::vector<uint8_t> head(static_cast<size_t>(std::min<std::streamoff>(size, 64 * 1024)));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
  if (!in) return {};
  // The last 64 bytes: from the head when it holds the whole file, else read from the end.
  const std::streamoff tail_size = std::min<std::streamoff>(size, 64);
  std::vector<uint8_t> tail(static_cast<size_t>(tail_size));
  PictureHeader header = header_of(head);
  if (static_cast<std::streamoff>(head.size()) == size) {
    std::copy(head.end() - tail_size, head.end(), tail.begin());
  } else {
    in.seekg(size - tail_size);
    in.read(reinterpret_cast<char*>(tail.data()), tail_size);
    if (!in) return header;
  }
  header.ends_whole = ends_whole(head, tail);
  return header;
}

// By value: a picture that already has the channels (or size) is moved through, not copied.
Picture with_channels(Picture picture, int channels) {
  if (picture.channels == channels) return picture;
  Picture out{picture.width, picture.height, channels, {}};
  const size_t n = static_cast<size_t>(picture.width) * picture.height;
  out.pixels.resize(n * channels);
  const int in = picture.channels;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* src = picture.pixels.data() + i * in;
    uint8_t* dst = out.pixels.data() + i * channels;
    if (channels == 1) {
      dst[0] = in >= 3 ? static_cast<uint8_t>((src[0] * 77 + src[1] * 150 + src[2] * 29) >> 8) : src[0];
    } else {
      for (int c = 0; c < 3; ++c) dst[c] = in >= 3 ? src[c] : src[0];
    }
  }
  return out;
}

Picture resized(Picture picture, int width, int height) {
  if (picture.width == width && picture.height == height) return picture;
  Picture out{width, height, picture.channels, std::vector<uint8_t>(static_cast<size_t>(width) * height * picture.channels)};
  if (stbir_resize_uint8(picture.pixels.data(), picture.width, picture.height, 0, out.pixels.data(), width, height, 0,
                         picture.channels) == 0) {
    throw std::runtime_error("stb_image_resize cannot resize a " + std::to_string(picture.width) + "x" +
                             std::to_string(picture.height) + " picture to " + std::to_string(width) + "x" +
                             std::to_string(height));
  }
  return out;
}

void to_chw(const Picture& p, uint8_t* chw) {
  const size_t plane = static_cast<size_t>(p.width) * p.height;
  for (size_t i = 0; i < plane; ++i) {
    for (int c = 0; c < p.channels; ++c) chw[c * plane + i] = p.pixels[i * p.channels + c];
  }
}

Picture from_chw(const uint8_t* chw, int channels, int height, int width) {
  Picture p{width, height, channels, std::vector<uint8_t>(static_cast<size_t>(width) * height * channels)};
  const size_t plane = static_cast<size_t>(width) * height;
  for (size_t i = 0; i < plane; ++i) {
    for (int c = 0; c < channels; ++c) p.pixels[i * channels + c] = chw[c * plane + i];
  }
  return p;
}

}  // namespace dpt::data
