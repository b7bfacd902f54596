// Where training data comes from: a folder or a file, in one of the formats dptrain reads,
// told by its contents or named, cut into a training and a test split, resized or
// recoloured on request, and passed through the transforms asked for. The one entry point
// the training job, evaluate and the benchmarks use to open data by name.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "dpt/data/dataset.h"
#include "dpt/data/idx_dataset.h"
#include "dpt/data/pictures.h"

namespace dpt::data {

// `data_format`'s choices: auto tells them apart by what `data_dir` holds.
inline constexpr std::array<std::string_view, 5> kDataFormats{"auto", "idx", "cifar", "folder", "numpy"};
inline constexpr std::array<std::string_view, 2> kCifarLabels{"fine", "coarse"};
inline constexpr std::array<std::string_view, 2> kOnBadImages{"stop", "skip"};

// Field names are what messages call them (`image_size`), as in train::JobConfig.
struct DataOptions {
  std::string data_dir = kDefaultDataDir;  // a folder, or an .npz file
  std::string data_format = "auto";        // kDataFormats
  int64_t image_size = 0;                  // resize to image_size x image_size; 0: as stored
  int64_t channels = 0;                    // 1 or 3; 0: as stored
  double test_split = 0;                   // held out of the training data where no test split exists
  std::string cifar_labels = "fine";       // kCifarLabels: CIFAR-100's label set
  std::string on_bad_image = "stop";       // kOnBadImages: an image folder's undecodable pictures
  int64_t max_image_pixels = kDefaultMaxImagePixels;  // a picture's width x height, read from its header
  int64_t data_cache = 2048;               // MiB of an image folder's decoded pictures kept, per process
  int64_t train_limit = 0;                 // the first N examples of a split; 0: all
  int64_t test_limit = 0;
  // Training-time augmentation, and normalization by the training split's channel statistics.
  int64_t random_crop = 0;                 // padding of a random crop; 0: none
  bool hflip = false;
  bool normalize = false;
  uint64_t seed = 0;                       // of the held-out split
  std::function<void(const std::string&)> warn;
};

struct LoadedData {
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> test;
  std::string format;  // "idx", "cifar-10", "cifar-100", "folder", "numpy"
};

// Checks every choice and limit of `options` (ConfigError naming the field).
void validate(const DataOptions& options);

// The format `data_dir` holds: idx, cifar, folder or numpy. The named one unless "auto".
// Throws DataError when auto finds none (naming what each format looks like), and for a
// path that does not exist (with the Fashion-MNIST package's hint only for the default data).
std::string detect_format(const DataOptions& options);

// Both splits, ready for the loader. Throws DataError (bad data, named with its fix) or
// ConfigError (a setting that cannot apply to this data).
LoadedData load_data(const DataOptions& options);

// Throws DataError for an empty split or data of fewer than two classes.
void check_trainable(const Dataset& train, const Dataset& test, const std::string& data_dir);

// Throws DataError unless `test` has `train`'s image shape and classes.
void check_splits_agree(const Dataset& train, const Dataset& test);

}  // namespace dpt::data
