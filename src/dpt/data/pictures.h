// Pictures in files: decoding (JPEG with libjpeg-turbo, PNG, BMP, GIF, TGA, PNM and the
// rest with stb_image), and the two changes a data set may ask of any 8-bit image:
// another channel count and another size. Images here are 8-bit, interleaved
// (height x width x channels) as decoders give them, unless a name says CHW.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dpt::data {

// The most pixels (width x height) a picture may declare before it is decoded: Pillow's
// MAX_IMAGE_PIXELS. A few hundred bytes of JPEG or PNG can declare 60000 x 60000 pixels
// (a decompression bomb: 3.6 GB once decoded); a real photo is far below it. Data options
// and `dptrain predict` raise it with `max_image_pixels`.
inline constexpr int64_t kDefaultMaxImagePixels = 89'478'485;

struct Picture {
  int width = 0, height = 0, channels = 0;  // channels: 1 grey, 2 grey + alpha, 3 RGB, 4 RGBA
  std::vector<uint8_t> pixels;              // height * width * channels, interleaved
};

// Decodes `bytes` (the file's contents; `source` names it in errors). Throws DataError
// "cannot decode picture SOURCE: REASON" when the bytes are no picture either decoder reads,
// and before decoding anything when the header declares more than `max_pixels` pixels.
Picture decode_picture(const std::vector<uint8_t>& bytes, const std::string& source,
                       int64_t max_pixels = kDefaultMaxImagePixels);
// The file's bytes; throws DataError naming the file when it cannot be read.
std::vector<uint8_t> read_file(const std::filesystem::path& file);
// What a picture file's first 64 KiB and last 64 bytes tell, read in one open (an image
// folder checks every picture so when it opens):
//   channels    the count the header declares; 0 when neither decoder recognises it
//   ends_whole  whether the file ends where a PNG or JPEG must (PNG: its IEND chunk;
//               JPEG: the EOI marker within its last 64 bytes): how an interrupted copy
//               or download shows. True for the other formats, which have no end mark.
//   width, height  the size it declares (0 when unread)
struct PictureHeader {
  int channels = 0;
  bool ends_whole = true;
  int64_t width = 0, height = 0;
};
PictureHeader read_picture_header(const std::filesystem::path& file);

// Throws DataError unless `header` (of `source`) declares at most `max_pixels` pixels; the
// message names the file, its size and the `max_image_pixels` setting.
void check_picture_size(const PictureHeader& header, const std::string& source, int64_t max_pixels);

// `picture` with `channels` (1 or 3) channels: grey from colour by ITU-R BT.601 luma (as
// stb_image computes it), colour from grey by copying, alpha dropped.
Picture with_channels(Picture picture, int channels);
// `picture` resized to width x height (stb_image_resize's default filters: Mitchell when
// shrinking, Catmull-Rom when enlarging); the same picture when the size already matches.
Picture resized(Picture picture, int width, int height);
// Writes `picture` in channel-major order (CHW), as data sets hold examples.
void to_chw(const Picture& picture, uint8_t* chw);
// The picture of CHW bytes (the inverse of to_chw).
Picture from_chw(const uint8_t* chw, int channels, int height, int width);

}  // namespace dpt::data
