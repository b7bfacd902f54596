// Fashion-MNIST (Zalando): 28x28 grey-scale images of clothing in 10 classes, 60,000 for
// training and 10,000 for testing, stored as IDX files. Debian ships them in the package
// dataset-fashion-mnist under kDefaultDataDir.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dpt::data {

constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";
constexpr int64_t kNumClasses = 10;

enum class Split { train, test };
const char* split_name(Split split);  // "train" / "test"

struct Dataset {
  std::vector<uint8_t> pixels;  // size() * rows * cols bytes, image-major, row-major
  std::vector<int64_t> labels;  // one class index in [0, kNumClasses) per image
  int64_t rows = 28, cols = 28;
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

// Loads one split from `dir`, which holds train-images-idx3-ubyte / train-labels-idx1-ubyte
// and t10k-images-idx3-ubyte / t10k-labels-idx1-ubyte, each gzip-compressed (".gz", as
// Debian and the original site ship them) or plain. Throws DataError naming the cause and
// the fix when the directory or a file is missing, a file is damaged, the image and label
// counts differ, or a label is outside 0-9.
Dataset load_fashion_mnist(const std::filesystem::path& dir, Split split);

// The 10 class names, indexed by label: "t-shirt", "trouser", ..., "ankle boot".
std::vector<std::string> class_names();
// The 10 class names as the data set's authors write them, indexed by label:
// "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
// "Bag", "Ankle boot".
std::vector<std::string> class_titles();

// The first `count` examples of `data` (all of them if it has fewer): a quick subset for
// smoke runs of large models. Throws std::invalid_argument for count < 1.
Dataset take_first(const Dataset& data, int64_t count);

}  // namespace dpt::data
