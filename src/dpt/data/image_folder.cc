#include "dpt/data/image_folder.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <thread>

#include "dpt/data/data_error.h"
#include "dpt/data/pictures.h"

namespace dpt::data {
namespace {

bool is_picture(const std::filesystem::path& file) {
  std::string ext = file.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* known : {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tga", ".pgm", ".ppm", ".pnm"}) {
    if (ext == known) return true;
  }
  return false;
}

// A folder or file that cannot be listed or looked at (a symbolic link that points back
// into itself, no permission), named with the system's reason.
[[noreturn]] void unreadable(const std::filesystem::path& path, const std::error_code& ec) {
  const std::string fix = ec == std::errc::too_many_symbolic_link_levels
                              ? "a symbolic link there points back into itself (a loop); remove or fix the link"
                              : "check that it exists and is readable";
  throw DataError("cannot read " + in_quotes(path) + " (" + ec.message() + "); " + fix);
}

std::vector<std::filesystem::path> sorted_entries(const std::filesystem::path& dir, bool folders) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code status_ec;
    const std::filesystem::file_status status = it->status(status_ec);
    if (status_ec && status_ec != std::errc::no_such_file_or_directory) unreadable(it->path(), status_ec);
    if (folders ? std::filesystem::is_directory(status)
                : (std::filesystem::is_regular_file(status) && is_picture(it->path()))) {
      out.push_back(it->path());
    }
  }
  if (ec) unreadable(dir, ec);
  std::sort(out.begin(), out.end());
  return out;
}

std::string bad_image_fix() { return "remove it, or pass `on_bad_image` skip to leave such pictures out"; }

}  // namespace

bool is_image_folder(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return false;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    if (entry.is_directory()) return true;
  }
  return false;
}

ImageFolder::ImageFolder(const std::filesystem::path& split_dir, const ImageFolderOptions& options,
                         std::vector<std::string> classes)
    : dir_(split_dir), options_(options), classes_(std::move(classes)) {
  const std::vector<std::filesystem::path> class_dirs = sorted_entries(split_dir, /*folders=*/true);
  if (class_dirs.empty()) {
    throw DataError("image folder " + in_quotes(split_dir) +
                    " holds no class folders; put the pictures of each class in a folder named after it (" +
                    (split_dir / "CLASS" / "PICTURE.jpg").string() + ")");
  }
  const bool own_classes = classes_.empty();
  for (const std::filesystem::path& class_dir : class_dirs) {
    const std::string name = class_dir.filename().string();
    // Checked now, not when the first checkpoint records the names (JSON is UTF-8).
    if (!is_utf8(name)) {
      throw DataError("class folder " + in_quotes(class_dir) +
                      " has a name that is not UTF-8 (its bytes are shown as \\xNN); rename it with UTF-8 characters "
                      "(e.g. convmv -f latin1 -t utf8), since the class names go into checkpoints and reports");
    }
    if (own_classes) classes_.push_back(name);
    const auto known = std::find(classes_.begin(), classes_.end(), name);
    if (known == classes_.end()) {
      throw DataError("class folder " + in_quotes(class_dir) + " names a class the training split has no folder for; " +
                      "add it to the training split or remove it");
    }
    const std::vector<std::filesystem::path> pictures = sorted_entries(class_dir, /*folders=*/false);
    if (pictures.empty()) {
      throw DataError("class folder " + in_quotes(class_dir) +
                      " holds no pictures (.jpg, .png, .bmp, .gif, .tga, .pgm, .ppm); add some or remove the folder");
    }
    for (const std::filesystem::path& p : pictures) {
      files_.push_back(p);
      labels_.push_back(known - classes_.begin());
    }
  }
  // The headers tell the channels (and the default size) without decoding the pictures.
  const std::vector<Checked> checked = check_pictures();
  int64_t colour = 0;
  size_t kept = 0;
  PictureHeader first;
  for (size_t i = 0; i < files_.size(); ++i) {
    if (!checked[i].problem.empty()) {
      if (options_.on_bad_image == OnBadImage::stop) throw DataError(checked[i].problem + "; " + bad_image_fix());
      continue;
    }
    const PictureHeader& header = checked[i].header;
    if (kept == 0) first = header;
    colour += header.channels >= 3;
    files_[kept] = files_[i];
    labels_[kept] = labels_[i];
    ++kept;
  }
  if (kept < files_.size() && options_.warn) {
    options_.warn("left out " + std::to_string(files_.size() - kept) + " picture(s) of " + in_quotes(split_dir) +
                  " that do not decode (`on_bad_image` skip)");
  }
  files_.resize(kept);
  labels_.resize(kept);
  if (files_.empty()) throw DataError("image folder " + in_quotes(split_dir) + " holds no picture that decodes");
  shape_.channels = options_.channels > 0 ? options_.channels : (colour > 0 ? 3 : 1);
  if (options_.image_size > 0) {
    shape_.height = shape_.width = options_.image_size;
  } else {
    shape_.height = first.height;
    shape_.width = first.width;
  }
  const int64_t slots = std::min(size(), std::max<int64_t>(options_.cache_bytes, 0) / shape_.numel());
  if (slots > 0) cache_ = std::make_shared<Cache>(slots, shape_.numel());
}

DataInfo ImageFolder::info() const {
  DataInfo info;
  info.shape = shape_;
  info.classes = classes_;
  return info;
}

std::vector<ImageFolder::Checked> ImageFolder::check_pictures() const {
  std::vector<Checked> checked(files_.size());
  const auto check = [&](size_t i) {
    const std::string source = in_quotes(files_[i]);
    const PictureHeader header = checked[i].header = read_picture_header(files_[i]);
    std::string& problem_text = checked[i].problem;
    const char* problem = header.channels == 0 ? "neither libjpeg-turbo nor stb_image reads it"
                          : !header.ends_whole ? "the file ends before the picture does (cut short)"
                                               : nullptr;
    if (problem) {
      problem_text = "cannot decode picture " + source + ": " + problem;
      return;
    }
    try {
      check_picture_size(header, source, options_.max_pixels);
      // `skip` promises that training never meets a picture that does not decode: a header
      // can read well over damaged data, so each picture is decoded once here.
      if (options_.on_bad_image == OnBadImage::skip) decode_picture(read_file(files_[i]), source, options_.max_pixels);
    } catch (const DataError& e) {
      problem_text = e.what();
    }
  };
  const size_t threads = options_.on_bad_image == OnBadImage::skip
                             ? std::max<size_t>(1, std::min<size_t>(std::thread::hardware_concurrency(), files_.size()))
                             : 1;
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < files_.size();) check(i);
  };
  std::vector<std::jthread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  pool.clear();  // joins: every check has written its result
  return checked;
}

std::vector<uint8_t> ImageFolder::decode(int64_t index) const {
  const std::filesystem::path& file = files_[static_cast<size_t>(index)];
  Picture p;
  try {
    p = decode_picture(read_file(file), in_quotes(file), options_.max_pixels);
  } catch (const DataError& e) {
    // Found only now, when its batch is filled: `on_bad_image` skip acts when the folder is
    // opened (a header that does not read, a file cut short), so this stops either way.
    throw DataError(std::string(e.what()) + "; remove or replace it, or pass `on_bad_image` skip (which decodes "
                    "every picture when the folder opens, and leaves out those that fail)");
  }
  p = resized(with_channels(std::move(p), static_cast<int>(shape_.channels)), static_cast<int>(shape_.width),
              static_cast<int>(shape_.height));
  std::vector<uint8_t> chw(static_cast<size_t>(shape_.numel()));
  to_chw(p, chw.data());
  return chw;
}

// Slot i holds example i's CHW bytes once state[i] is filled (release/acquire pairs the
// bytes with the flag); claimed marks the one writer.
struct ImageFolder::Cache {
  enum : uint8_t { empty, claimed, filled };
  Cache(int64_t slots, int64_t bytes_each)
      : slots(slots),
        bytes_each(bytes_each),
        bytes(std::make_unique_for_overwrite<uint8_t[]>(static_cast<size_t>(slots * bytes_each))),
        state(std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(slots))) {}
  const int64_t slots;
  const int64_t bytes_each;
  std::unique_ptr<uint8_t[]> bytes;  // not zeroed: pages are touched only as slots fill
  std::unique_ptr<std::atomic<uint8_t>[]> state;
};

int64_t ImageFolder::cacheable_examples() const { return cache_ ? cache_->slots : 0; }

const uint8_t* ImageFolder::pixels(int64_t index, std::vector<uint8_t>& scratch) const {
  if (!cache_ || index >= cache_->slots) {
    scratch = decode(index);
    return scratch.data();
  }
  std::atomic<uint8_t>& state = cache_->state[static_cast<size_t>(index)];
  uint8_t* slot = cache_->bytes.get() + index * cache_->bytes_each;
  if (state.load(std::memory_order_acquire) == Cache::filled) return slot;
  scratch = decode(index);
  uint8_t expected = Cache::empty;
  if (state.compare_exchange_strong(expected, Cache::claimed, std::memory_order_acquire)) {
    std::copy(scratch.begin(), scratch.end(), slot);
    state.store(Cache::filled, std::memory_order_release);
  }
  return scratch.data();
}

void ImageFolder::fill(std::span<const int64_t> indices, const Draw&, float* images, int64_t* labels) const {
  std::vector<uint8_t> scratch;
  const int64_t numel = shape_.numel();
  for (size_t b = 0; b < indices.size(); ++b) {
    const uint8_t* chw = pixels(indices[b], scratch);
    float* dst = images + static_cast<int64_t>(b) * numel;
    for (int64_t p = 0; p < numel; ++p) dst[p] = static_cast<float>(chw[p]) / 255.0f;
    labels[b] = labels_[static_cast<size_t>(indices[b])];
  }
}

}  // namespace dpt::data
