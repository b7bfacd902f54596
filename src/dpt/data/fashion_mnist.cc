#include "dpt/data/fashion_mnist.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "dpt/data/data_error.h"
#include "dpt/data/idx.h"

namespace dpt::data {
namespace {

const std::string kInstallHint =
    "install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist) "
    "or pass `data_dir` DIR";

std::string in_quotes(const std::filesystem::path& path) { return "'" + path.string() + "'"; }

// The original distribution is gzipped; some mirrors and users unpack it. Either works,
// and the .gz name wins when both exist because it is what the Debian package installs.
std::filesystem::path find_file(const std::filesystem::path& dir, const std::string& base) {
  std::error_code ec;
  for (const std::string& name : {base + ".gz", base}) {
    if (std::filesystem::exists(dir / name, ec)) return dir / name;
  }
  throw DataError("Fashion-MNIST file " + in_quotes(base + ".gz") + " (or " + in_quotes(base) + ") is missing in " +
                  in_quotes(dir) +
                  "; reinstall the Debian package dataset-fashion-mnist or pass `data_dir` DIR "
                  "with a complete copy");
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

}  // namespace

const char* split_name(Split split) { return split == Split::train ? "train" : "test"; }

Dataset load_fashion_mnist(const std::filesystem::path& dir, Split split) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    throw DataError("Fashion-MNIST directory " + in_quotes(dir) + " does not exist; " + kInstallHint);
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    throw DataError("Fashion-MNIST path " + in_quotes(dir) + " is not a directory; " + kInstallHint);
  }

  const std::string prefix = split == Split::train ? "train" : "t10k";
  const std::filesystem::path images_file = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::filesystem::path labels_file = find_file(dir, prefix + "-labels-idx1-ubyte");

  IdxArray images = read_idx(images_file);
  if (images.dims.size() != 3) {
    throw DataError("Fashion-MNIST images file " + in_quotes(images_file) + " has dimensions " + dims_str(images.dims) +
                    ", expected 3 (count, rows, cols); it is not an images file, check the file names");
  }
  IdxArray labels = read_idx(labels_file);
  if (labels.dims.size() != 1) {
    throw DataError("Fashion-MNIST labels file " + in_quotes(labels_file) + " has dimensions " + dims_str(labels.dims) +
                    ", expected 1 (count); it is not a labels file, check the file names");
  }
  if (images.dims[0] != labels.dims[0]) {
    throw DataError("Fashion-MNIST " + std::string(split_name(split)) +
                    " split is inconsistent: " + in_quotes(images_file) + " holds " + std::to_string(images.dims[0]) +
                    " images but " + in_quotes(labels_file) + " holds " + std::to_string(labels.dims[0]) +
                    " labels; the files come from different copies, reinstall dataset-fashion-mnist");
  }

  Dataset data;
  data.rows = images.dims[1];
  data.cols = images.dims[2];
  data.pixels = std::move(images.values);
  data.labels.reserve(labels.values.size());
  for (size_t i = 0; i < labels.values.size(); ++i) {
    const int64_t label = labels.values[i];
    if (label >= kNumClasses) {
      throw DataError("Fashion-MNIST labels file " + in_quotes(labels_file) + ": label at index " + std::to_string(i) +
                      " is " + std::to_string(label) +
                      ", outside the class range 0-9; the file is corrupt, reinstall dataset-fashion-mnist");
    }
    data.labels.push_back(label);
  }
  return data;
}

std::vector<std::string> class_names() {
  return {"t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot"};
}

std::vector<std::string> class_titles() {
  return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
}

Dataset take_first(const Dataset& data, int64_t count) {
  if (count < 1) throw std::invalid_argument("a subset needs at least one example, got " + std::to_string(count));
  const int64_t n = std::min(count, data.size());
  const int64_t image = data.rows * data.cols;
  Dataset subset;
  subset.rows = data.rows;
  subset.cols = data.cols;
  subset.pixels.assign(data.pixels.begin(), data.pixels.begin() + n * image);
  subset.labels.assign(data.labels.begin(), data.labels.begin() + n);
  return subset;
}

}  // namespace dpt::data
