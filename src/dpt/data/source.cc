#include "dpt/data/source.h"

#include <cmath>
#include <utility>

#include "dpt/core/config_error.h"
#include "dpt/data/cifar.h"
#include "dpt/data/data_error.h"
#include "dpt/data/image_folder.h"
#include "dpt/data/numpy.h"
#include "dpt/data/pictures.h"
#include "dpt/data/subset.h"
#include "dpt/data/transforms.h"

namespace dpt::data {
namespace {

namespace fs = std::filesystem;

bool one_of(std::string_view text, std::span<const std::string_view> choices) {
  for (std::string_view c : choices) {
    if (c == text) return true;
  }
  return false;
}

bool holds_idx(const fs::path& dir) {
  std::error_code ec;
  for (const char* name : {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte",
                           "t10k-images-idx3-ubyte.gz"}) {
    if (fs::exists(dir / name, ec)) return true;
  }
  return false;
}

// Brings 8-bit images held in memory to the channels and size asked for (0: as they are).
InMemoryDataset conform(InMemoryDataset data, const DataOptions& o) {
  const int64_t channels = o.channels > 0 ? o.channels : data.channels;
  const int64_t side_h = o.image_size > 0 ? o.image_size : data.rows, side_w = o.image_size > 0 ? o.image_size : data.cols;
  if (channels == data.channels && side_h == data.rows && side_w == data.cols) return data;
  if (data.pixels.empty() && data.size() > 0) {
    throw ConfigError(o.image_size > 0 ? "image_size" : "channels",
                      "the float32 images of " + in_quotes(o.data_dir) +
                          " are taken as they are: resizing and recolouring apply to 8-bit images; leave `image_size` "
                          "and `channels` at 0, or save the images as uint8");
  }
  const int64_t in_image = data.channels * data.rows * data.cols, out_image = channels * side_h * side_w;
  std::vector<uint8_t> out(static_cast<size_t>(data.size() * out_image));
  for (int64_t i = 0; i < data.size(); ++i) {
    Picture p = from_chw(data.pixels.data() + i * in_image, static_cast<int>(data.channels),
                               static_cast<int>(data.rows), static_cast<int>(data.cols));
    to_chw(resized(with_channels(std::move(p), static_cast<int>(channels)), static_cast<int>(side_w), static_cast<int>(side_h)),
           out.data() + i * out_image);
  }
  data.pixels = std::move(out);
  data.channels = channels;
  data.rows = side_h;
  data.cols = side_w;
  return data;
}

std::shared_ptr<const Dataset> in_memory(InMemoryDataset data, const DataOptions& o) {
  return std::make_shared<InMemoryDataset>(conform(std::move(data), o));
}

struct Splits {
  std::shared_ptr<const Dataset> train, test;  // test: null where the data has none
  std::string format;
};

Splits load_folder(const DataOptions& o) {
  const fs::path root = o.data_dir;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    throw DataError("image folder " + in_quotes(root) + " does not exist or is not a folder; pass `data_dir` DIR holding " +
                    "train/CLASS/PICTURE files");
  }
  const bool split_folders = fs::is_directory(root / "train", ec);
  ImageFolderOptions options;
  options.image_size = o.image_size;
  options.channels = o.channels;
  options.on_bad_image = o.on_bad_image == "skip" ? OnBadImage::skip : OnBadImage::stop;
  options.max_pixels = o.max_image_pixels;
  options.warn = o.warn;
  // The budget goes to the training split first, the test split gets what is left.
  options.cache_bytes = o.data_cache * (int64_t{1} << 20);
  auto train = std::make_shared<ImageFolder>(split_folders ? root / "train" : root, options);
  Splits s{train, nullptr, "folder"};
  if (split_folders && fs::is_directory(root / "test", ec)) {
    ImageFolderOptions test_options = options;  // the test pictures take the training split's shape
    const DataInfo info = train->info();
    test_options.image_size = info.shape.height;
    test_options.channels = info.shape.channels;
    test_options.cache_bytes = std::max<int64_t>(options.cache_bytes - train->cacheable_examples() * info.shape.numel(), 0);
    s.test = std::make_shared<ImageFolder>(root / "test", test_options, info.classes);
  }
  return s;
}

// A split held in memory, cut to `limit` examples before it is resized: `train_limit` 16 at
// `image_size` 224 resizes 16 pictures, not the whole split. Only splits the data holds of
// its own are cut here; a held-out split is cut after the hold-out (load_data).
std::shared_ptr<const Dataset> in_memory(InMemoryDataset data, const DataOptions& o, int64_t limit) {
  if (limit > 0 && limit < data.size()) data = take_first(data, limit);
  return in_memory(std::move(data), o);
}

Splits load_splits(const DataOptions& o, const std::string& format) {
  const fs::path dir = o.data_dir;
  if (format == "idx") {
    return {in_memory(load_idx(dir, Split::train), o, o.train_limit), in_memory(load_idx(dir, Split::test), o, o.test_limit),
            "idx"};
  }
  if (format == "cifar") {
    const CifarLabels labels = o.cifar_labels == "coarse" ? CifarLabels::coarse : CifarLabels::fine;
    return {in_memory(load_cifar(dir, Split::train, labels), o, o.train_limit),
            in_memory(load_cifar(dir, Split::test, labels), o, o.test_limit), is_cifar100_dir(dir) ? "cifar-100" : "cifar-10"};
  }
  if (format == "numpy") {
    std::error_code ec;
    if (!fs::exists(dir, ec)) {
      throw DataError("NumPy data " + in_quotes(dir) + " does not exist; pass `data_dir` an .npz file or a folder of .npy files");
    }
    if (!numpy_has_test_split(dir)) return {in_memory(load_numpy(dir, Split::train), o), nullptr, "numpy"};
    return {in_memory(load_numpy(dir, Split::train), o, o.train_limit), in_memory(load_numpy(dir, Split::test), o, o.test_limit),
            "numpy"};
  }
  return load_folder(o);
}

}  // namespace

void validate(const DataOptions& o) {
  if (!one_of(o.data_format, kDataFormats)) throw bad_choice("data_format", o.data_format, kDataFormats);
  if (!one_of(o.cifar_labels, kCifarLabels)) throw bad_choice("cifar_labels", o.cifar_labels, kCifarLabels);
  if (!one_of(o.on_bad_image, kOnBadImages)) throw bad_choice("on_bad_image", o.on_bad_image, kOnBadImages);
  if (o.data_cache < 0) throw ConfigError("data_cache", "`data_cache` must be >= 0 MiB (0: decode every batch), got " + std::to_string(o.data_cache));
  if (o.image_size < 0) throw ConfigError("image_size", "`image_size` must be >= 0 (0: as stored), got " + std::to_string(o.image_size));
  if (o.channels != 0 && o.channels != 1 && o.channels != 3) {
    throw ConfigError("channels", "`channels` must be 1 (grey), 3 (colour) or 0 (as stored), got " + std::to_string(o.channels));
  }
  if (!(o.test_split >= 0 && o.test_split < 1)) {
    throw ConfigError("test_split", "`test_split` must be a fraction in [0, 1), got " + std::to_string(o.test_split));
  }
  if (o.random_crop < 0) throw ConfigError("random_crop", "`random_crop` must be >= 0 pixels of padding, got " + std::to_string(o.random_crop));
  if (o.max_image_pixels < 1) {
    throw ConfigError("max_image_pixels", "`max_image_pixels` must be >= 1, got " + std::to_string(o.max_image_pixels));
  }
  // Checked before any picture is resized: image_size 100000 would ask for 10^10 pixels a picture.
  if (o.image_size > 0 && o.image_size > o.max_image_pixels / o.image_size) {
    throw ConfigError("image_size", "`image_size` " + std::to_string(o.image_size) + " makes pictures of " +
                                        std::to_string(o.image_size) + "x" + std::to_string(o.image_size) +
                                        " pixels, more than `max_image_pixels` " + std::to_string(o.max_image_pixels) +
                                        "; choose a smaller `image_size` (e.g. 224), or raise `max_image_pixels`");
  }
}

std::string detect_format(const DataOptions& o) {
  if (o.data_format != "auto") return o.data_format;
  const fs::path path = o.data_dir;
  std::error_code ec;
  // IDX's message names what is missing, with the Debian package's hint for Fashion-MNIST.
  if (!fs::exists(path, ec)) return "idx";
  if (path.extension() == ".npz" || (fs::is_directory(path, ec) && fs::exists(path / "x_train.npy", ec))) return "numpy";
  if (fs::is_directory(path, ec)) {
    if (holds_idx(path)) return "idx";
    if (is_cifar10_dir(path) || is_cifar100_dir(path)) return "cifar";
    if (is_image_folder(path)) return "folder";
  }
  throw DataError("cannot tell what data " + in_quotes(path) +
                  " holds: no IDX files (train-images-idx3-ubyte[.gz]), CIFAR batches (data_batch_1.bin, train.bin), "
                  "NumPy arrays (an .npz file, x_train.npy) or class folders (train/CLASS/PICTURE); pass `data_format` "
                  "idx, cifar, folder or numpy");
}

void check_trainable(const Dataset& train, const Dataset& test, const std::string& data_dir) {
  if (train.size() == 0) {
    throw DataError("the training split of " + in_quotes(data_dir) + " is empty (0 examples); give it examples");
  }
  if (test.size() == 0) {
    throw DataError("the test split of " + in_quotes(data_dir) + " is empty (0 examples); give it examples, or leave " +
                    "it out and pass `test_split` FRACTION");
  }
  const std::vector<std::string> classes = train.info().classes;
  if (classes.size() < 2) {
    throw DataError("the data of " + in_quotes(data_dir) + " has one class only" +
                    (classes.empty() ? std::string() : " ('" + printable(classes[0]) + "')") +
                    "; a classifier needs two or more");
  }
}

void check_splits_agree(const Dataset& train, const Dataset& test) {
  const DataInfo a = train.info(), b = test.info();
  if (a.shape != b.shape) {
    throw DataError("the test split's images are " + b.shape.str() + ", the training split's " + a.shape.str() +
                    "; give both splits one size and channel count (or pass `image_size` and `channels`)");
  }
  if (a.classes != b.classes) {
    throw DataError("the test split names " + std::to_string(b.classes.size()) + " classes, the training split " +
                    std::to_string(a.classes.size()) + " (" + class_difference(a.classes, "the training split", b.classes, "the test split") +
                    "); both splits must share one list of classes");
  }
}

LoadedData load_data(const DataOptions& o) {
  validate(o);
  const std::string format = detect_format(o);
  Splits s = load_splits(o, format);
  if (s.test && o.test_split > 0) {
    throw ConfigError("test_split", in_quotes(o.data_dir) + " has a test split of its own; leave `test_split` at 0");
  }
  if (!s.test) {
    if (o.test_split <= 0) {
      throw ConfigError("test_split", in_quotes(o.data_dir) + " holds no test split (" +
                                          (format == "folder" ? "no test/ folder" : "no x_test and y_test arrays") +
                                          "); pass `test_split` FRACTION (e.g. 0.1) to hold out part of the training data");
    }
    SplitPair cut = hold_out(s.train, o.test_split, o.seed);
    s.train = std::move(cut.train);
    s.test = std::move(cut.test);
  }
  if (o.train_limit > 0) s.train = first_examples(s.train, o.train_limit);
  if (o.test_limit > 0) s.test = first_examples(s.test, o.test_limit);
  check_splits_agree(*s.train, *s.test);
  check_trainable(*s.train, *s.test, o.data_dir);

  std::vector<std::shared_ptr<const Transform>> train_transforms, test_transforms;
  if (o.random_crop > 0) train_transforms.push_back(random_crop(o.random_crop));
  if (o.hflip) train_transforms.push_back(hflip());
  if (o.normalize) {
    const ChannelStats stats = channel_stats(*s.train);
    train_transforms.push_back(normalize(stats.mean, stats.stddev));
    test_transforms.push_back(normalize(stats.mean, stats.stddev));
  }
  if (!train_transforms.empty()) s.train = transformed(std::move(s.train), std::move(train_transforms));
  if (!test_transforms.empty()) s.test = transformed(std::move(s.test), std::move(test_transforms));
  return {std::move(s.train), std::move(s.test), s.format};
}

}  // namespace dpt::data
