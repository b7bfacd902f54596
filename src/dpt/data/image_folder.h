// An image folder, as torchvision's ImageFolder reads one: one subfolder per class, named
// after it, holding its pictures, inside train/ and test/:
//   pets/train/cat/001.jpg  pets/train/dog/002.png  ...  pets/test/cat/101.jpg ...
// Classes are the train/ subfolders in sorted order; pictures are the files with a picture
// extension (.jpg .jpeg .png .bmp .gif .tga .pgm .ppm .pnm, any case), sorted by name.
// Every picture is decoded (data/pictures.h), brought to `channels` (by default: colour if
// any picture of the split is colour, else grey) and resized to image_size x image_size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpt/data/dataset.h"
#include "dpt/data/pictures.h"

namespace dpt::data {

enum class OnBadImage { stop, skip };

struct ImageFolderOptions {
  int64_t image_size = 0;  // the side pictures are resized to; 0: the first picture's size
  int64_t channels = 0;    // 1 or 3; 0: follow the pictures
  // stop: a picture whose header does not read, that is cut short or larger than
  // max_pixels stops the opening with its name; skip: such pictures are left out, and every
  // other picture is decoded once on opening, so that none fails later, mid-training.
  OnBadImage on_bad_image = OnBadImage::stop;
  int64_t max_pixels = kDefaultMaxImagePixels;  // a picture's width x height (pictures.h)
  // Decoded pictures are kept in memory up to this many bytes (the examples of the lowest
  // indices, as uint8, when first filled); the rest are decoded for every batch. 0: none.
  int64_t cache_bytes = 0;
  std::function<void(const std::string&)> warn;  // skip: told once how many pictures were dropped
};

// The pictures of one split folder (`pets/train`), decoded when an example is first
// filled: opening reads every picture's header only, so a process decodes only the
// examples it is asked for (under mpirun, its own shards). Filled examples stay in the
// cache while it has room, and are decoded again for every batch past it. fill() may run
// on several threads at once: a cache slot is written by the one thread that claims it.
class ImageFolder : public Dataset {
 public:
  // `classes`: the training split's (a test split must use them); empty: this folder's own.
  // Throws DataError for a folder with no class folders, a class folder with no pictures,
  // a test class the training split lacks, or (on_bad_image stop) a picture whose header
  // neither decoder reads.
  ImageFolder(const std::filesystem::path& split_dir, const ImageFolderOptions& options,
              std::vector<std::string> classes = {});

  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  DataInfo info() const override;
  void fill(std::span<const int64_t> indices, const Draw& draw, float* images, int64_t* labels) const override;

  const std::vector<std::filesystem::path>& files() const { return files_; }
  // How many examples (the first ones) the cache holds room for.
  int64_t cacheable_examples() const;

 private:
  struct Cache;
  // Per file, its header and why it cannot be used (empty: it can): an unreadable header, a
  // file cut short, a size past max_pixels, and under skip data that does not decode.
  struct Checked {
    PictureHeader header;
    std::string problem;
  };
  std::vector<Checked> check_pictures() const;
  // The example's CHW bytes; throws DataError naming the file when it does not decode.
  std::vector<uint8_t> decode(int64_t index) const;
  // The example's CHW bytes, from the cache or decoded into `scratch` (and cached if room).
  const uint8_t* pixels(int64_t index, std::vector<uint8_t>& scratch) const;

  std::filesystem::path dir_;
  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::vector<std::filesystem::path> files_;
  std::vector<int64_t> labels_;
  ImageShape shape_;
  std::shared_ptr<Cache> cache_;  // null without a cache_bytes budget
};

// Whether `path` is laid out as an image folder (has train/ with subfolders, or subfolders).
bool is_image_folder(const std::filesystem::path& path);

}  // namespace dpt::data
