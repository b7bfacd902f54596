#include "dpt/data/idx_dataset.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <stdexcept>
#include <string>

#include "dpt/data/data_error.h"
#include "dpt/data/fashion_mnist.h"
#include "dpt/data/idx.h"

namespace dpt::data {
namespace {

// What the messages call the data: the Debian package's hint only helps with Fashion-MNIST.
struct Naming {
  std::string noun;  // "Fashion-MNIST" or "IDX"
  std::string fix;           // how to get a complete copy
  std::string mismatch_fix;  // what to do about files of different copies
};

Naming fashion_naming() {
  return {"Fashion-MNIST", "reinstall the Debian package dataset-fashion-mnist or pass `data_dir` DIR with a complete copy",
          "reinstall dataset-fashion-mnist"};
}

Naming idx_naming() {
  return {"IDX", "put the split's images and labels files in the folder", "use the images and labels of one copy"};
}

bool named_fashion(const std::filesystem::path& dir) {
  std::string name = std::filesystem::path(dir).lexically_normal().filename().string();
  if (name.empty()) name = std::filesystem::path(dir).lexically_normal().parent_path().filename().string();
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return name.find("fashion") != std::string::npos;
}

// The original distribution is gzipped; some mirrors and users unpack it. Either works,
// and the .gz name wins when both exist because it is what the Debian package installs.
std::filesystem::path find_file(const std::filesystem::path& dir, const std::string& base, const Naming& naming) {
  std::error_code ec;
  for (const std::string& name : {base + ".gz", base}) {
    if (std::filesystem::exists(dir / name, ec)) return dir / name;
  }
  throw DataError(naming.noun + " file " + in_quotes(base + ".gz") + " (or " + in_quotes(base) + ") is missing in " +
                  in_quotes(dir) + "; " + naming.fix);
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

// Reads the split; labels are checked against `classes` names when given (else only >= 0).
InMemoryDataset read_split(const std::filesystem::path& dir, Split split, const Naming& naming,
                           const std::vector<std::string>& classes, const std::string& classes_source) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    throw DataError(naming.noun + " directory " + in_quotes(dir) + " does not exist; " +
                    "install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist) "
                    "or pass `data_dir` DIR");
  }
  if (!std::filesystem::is_directory(dir, ec)) {
    throw DataError(naming.noun + " path " + in_quotes(dir) + " is not a directory; " +
                    "install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist) "
                    "or pass `data_dir` DIR");
  }

  const std::string prefix = split == Split::train ? "train" : "t10k";
  const std::filesystem::path images_file = find_file(dir, prefix + "-images-idx3-ubyte", naming);
  const std::filesystem::path labels_file = find_file(dir, prefix + "-labels-idx1-ubyte", naming);

  IdxArray images = read_idx(images_file);
  if (images.dims.size() != 3) {
    throw DataError(naming.noun + " images file " + in_quotes(images_file) + " has dimensions " +
                    dims_str(images.dims) +
                    ", expected 3 (count, rows, cols); it is not an images file, check the file names");
  }
  IdxArray labels = read_idx(labels_file);
  if (labels.dims.size() != 1) {
    throw DataError(naming.noun + " labels file " + in_quotes(labels_file) + " has dimensions " +
                    dims_str(labels.dims) + ", expected 1 (count); it is not a labels file, check the file names");
  }
  if (images.dims[0] != labels.dims[0]) {
    throw DataError(naming.noun + " " + std::string(split_name(split)) +
                    " split is inconsistent: " + in_quotes(images_file) + " holds " + std::to_string(images.dims[0]) +
                    " images but " + in_quotes(labels_file) + " holds " + std::to_string(labels.dims[0]) +
                    " labels; the files come from different copies, " + naming.mismatch_fix);
  }

  InMemoryDataset data;
  data.channels = 1;
  data.rows = images.dims[1];
  data.cols = images.dims[2];
  data.light_on_dark = true;
  data.pixels = std::move(images.values);
  data.labels.reserve(labels.values.size());
  const int64_t count = static_cast<int64_t>(classes.size());
  for (size_t i = 0; i < labels.values.size(); ++i) {
    const int64_t label = labels.values[i];
    if (count > 0 && label >= count) {
      throw DataError(naming.noun + " labels file " + in_quotes(labels_file) + ": label at index " +
                      std::to_string(i) + " is " + std::to_string(label) + ", outside the class range 0-" +
                      std::to_string(count - 1) + "; " + classes_source);
    }
    data.labels.push_back(label);
  }
  data.class_names = classes;
  return data;
}

}  // namespace

const char* split_name(Split split) { return split == Split::train ? "train" : "test"; }

std::vector<std::string> read_class_names(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw DataError("cannot read the class names file " + in_quotes(file) + "; check its permissions");
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    names.push_back(line);
  }
  while (!names.empty() && names.back().empty()) names.pop_back();
  for (size_t i = 0; i < names.size(); ++i) {
    if (!is_utf8(names[i])) {
      throw DataError("the class names file " + in_quotes(file) + ": line " + std::to_string(i + 1) + " ('" +
                      printable(names[i]) + "') is not UTF-8; save the file as UTF-8");
    }
  }
  if (names.empty()) {
    throw DataError("the class names file " + in_quotes(file) + " names no class; write one name per line, in label order");
  }
  return names;
}

std::vector<std::string> classes_of_labels(const std::vector<int64_t>& train_labels, const std::string& where,
                                           const std::filesystem::path& names_file) {
  if (train_labels.empty()) throw DataError("the training split of " + where + " is empty (0 examples); give it examples");
  const int64_t largest = *std::max_element(train_labels.begin(), train_labels.end());
  // More class numbers than examples leaves some without one; said before anything is
  // allocated for a label as large as 2^63 - 1.
  if (static_cast<uint64_t>(largest) >= train_labels.size()) {
    throw DataError("the training labels of " + where + " run up to " + std::to_string(largest) + ", more classes than " +
                    "its " + std::to_string(train_labels.size()) + " training examples can cover: a damaged label, " +
                    "or classes without examples; name the classes in " + in_quotes(names_file) +
                    ", one per line, to train on them anyway");
  }
  const int64_t count = largest + 1;
  std::vector<bool> seen(static_cast<size_t>(count));
  for (int64_t label : train_labels) seen[static_cast<size_t>(label)] = true;
  std::string missing;
  int64_t missing_count = 0;
  for (int64_t c = 0; c < count; ++c) {
    if (seen[static_cast<size_t>(c)]) continue;
    if (++missing_count <= 5) missing += (missing.empty() ? "" : ", ") + std::to_string(c);
  }
  if (missing_count > 0) {
    throw DataError("the training labels of " + where + " run up to " + std::to_string(count - 1) + ", but " +
                    std::to_string(missing_count) + " of the classes 0-" + std::to_string(count - 1) +
                    " have no training example (" + missing + (missing_count > 5 ? ", ..." : "") +
                    "): a damaged label, or classes without examples; name the classes in " + in_quotes(names_file) +
                    ", one per line, to train on them anyway");
  }
  return numbered_classes(count);
}

InMemoryDataset load_idx(const std::filesystem::path& dir, Split split) {
  std::error_code ec;
  const std::filesystem::path names_file = dir / kClassNamesFile;
  if (std::filesystem::exists(names_file, ec)) {
    return read_split(dir, split, idx_naming(), read_class_names(names_file),
                      "add its class to " + in_quotes(names_file) + " or fix the label");
  }
  if (!std::filesystem::exists(dir, ec) && dir != std::filesystem::path(kDefaultDataDir) && !named_fashion(dir)) {
    throw DataError("data " + in_quotes(dir) + " does not exist; check the path given to `data_dir`");
  }
  if (named_fashion(dir) || !std::filesystem::exists(dir, ec)) return load_fashion_mnist(dir, split);
  // No names: the numbers up to the largest label of the training split, which every split shares.
  InMemoryDataset data = read_split(dir, split, idx_naming(), {}, "");
  if (split == Split::test) {
    const InMemoryDataset train = read_split(dir, Split::train, idx_naming(), {}, "");
    data.class_names = classes_of_labels(train.labels, in_quotes(dir), names_file);
    for (size_t i = 0; i < data.labels.size(); ++i) {
      if (data.labels[i] >= static_cast<int64_t>(data.class_names.size())) {
        throw DataError("IDX test label at index " + std::to_string(i) + " is " + std::to_string(data.labels[i]) +
                        ", a class the training split of " + in_quotes(dir) + " has no example of; name the classes in " +
                        in_quotes(names_file) + ", one per line");
      }
    }
  } else {
    data.class_names = classes_of_labels(data.labels, in_quotes(dir), names_file);
  }
  return data;
}

InMemoryDataset load_fashion_mnist(const std::filesystem::path& dir, Split split) {
  return read_split(dir, split, fashion_naming(), class_titles(),
                    "the file is corrupt, reinstall dataset-fashion-mnist");
}

}  // namespace dpt::data
