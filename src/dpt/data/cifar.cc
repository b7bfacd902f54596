#include "dpt/data/cifar.h"

#include <string>
#include <vector>

#include "dpt/data/data_error.h"
#include "dpt/data/pictures.h"

namespace dpt::data {
namespace {

constexpr int64_t kSide = 32, kChannels = 3, kImageBytes = kChannels * kSide * kSide;

struct Layout {
  std::vector<std::filesystem::path> files;
  std::filesystem::path names;
  int64_t label_bytes = 1;  // CIFAR-100 records start with its coarse and its fine label
  int64_t label_offset = 0;
};

Layout layout_of(const std::filesystem::path& dir, Split split, CifarLabels labels) {
  Layout layout;
  if (is_cifar100_dir(dir)) {
    layout.files = {dir / (split == Split::train ? "train.bin" : "test.bin")};
    layout.label_bytes = 2;
    layout.label_offset = labels == CifarLabels::coarse ? 0 : 1;
    layout.names = dir / (labels == CifarLabels::coarse ? "coarse_label_names.txt" : "fine_label_names.txt");
  } else {
    if (split == Split::train) {
      for (int b = 1; b <= 5; ++b) layout.files.push_back(dir / ("data_batch_" + std::to_string(b) + ".bin"));
    } else {
      layout.files = {dir / "test_batch.bin"};
    }
    layout.names = dir / "batches.meta.txt";
  }
  return layout;
}

}  // namespace

bool is_cifar10_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::exists(dir / "data_batch_1.bin", ec) || std::filesystem::exists(dir / "test_batch.bin", ec);
}

bool is_cifar100_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::exists(dir / "fine_label_names.txt", ec) ||
         (std::filesystem::exists(dir / "train.bin", ec) && std::filesystem::exists(dir / "test.bin", ec));
}

InMemoryDataset load_cifar(const std::filesystem::path& dir, Split split, CifarLabels labels) {
  const Layout layout = layout_of(dir, split, labels);
  const std::string set = layout.label_bytes == 2 ? "CIFAR-100" : "CIFAR-10";
  std::error_code ec;
  if (!std::filesystem::exists(layout.names, ec)) {
    throw DataError(set + " class names file " + in_quotes(layout.names) + " is missing in " + in_quotes(dir) +
                    "; it comes with the batches in the binary version's archive, unpack all of it");
  }
  InMemoryDataset data;
  data.channels = kChannels;
  data.rows = data.cols = kSide;
  data.class_names = read_class_names(layout.names);
  const int64_t classes = static_cast<int64_t>(data.class_names.size());
  const int64_t record = layout.label_bytes + kImageBytes;
  for (const std::filesystem::path& file : layout.files) {
    if (!std::filesystem::exists(file, ec)) {
      throw DataError(set + " batch " + in_quotes(file) + " is missing; unpack the whole binary version into " + in_quotes(dir));
    }
    const std::vector<uint8_t> bytes = read_file(file);
    const int64_t size = static_cast<int64_t>(bytes.size());
    if (size == 0 || size % record != 0) {
      throw DataError(set + " file " + in_quotes(file) + " holds " + std::to_string(size) + " bytes, not a whole number of " +
                      std::to_string(record) + "-byte records; it is cut short or not a " + set +
                      " binary batch, download it again");
    }
    const int64_t first = data.size();
    data.pixels.resize(static_cast<size_t>((first + size / record) * kImageBytes));
    for (int64_t r = 0; r < size / record; ++r) {
      const uint8_t* rec = bytes.data() + r * record;
      const int64_t label = rec[layout.label_offset];
      if (label >= classes) {
        throw DataError(set + " file " + in_quotes(file) + ": the label of record " + std::to_string(r) + " is " +
                        std::to_string(label) + ", outside the " + std::to_string(classes) + " classes of " +
                        in_quotes(layout.names) + "; the file is damaged, download it again");
      }
      data.labels.push_back(label);
      std::copy(rec + layout.label_bytes, rec + record, data.pixels.begin() + (first + r) * kImageBytes);
    }
  }
  return data;
}

}  // namespace dpt::data
