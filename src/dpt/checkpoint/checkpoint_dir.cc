#include "dpt/checkpoint/checkpoint_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace dpt::checkpoint {
namespace {

// "step-" followed by at least 9 digits and ".ckpt": what file_name_for_step() writes.
bool is_checkpoint_name(std::string_view name) {
  constexpr std::string_view kPrefix = "step-", kSuffix = ".ckpt";
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return false;
  const std::string_view digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  return digits.size() >= 9 && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

[[noreturn]] void fail(const std::string& action, const std::filesystem::path& path) {
  throw std::runtime_error("cannot " + action + " " + path.string() + ": " + std::strerror(errno));
}

// Closes the descriptor on every path out, including a throw.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

void write_all(int fd, const uint8_t* data, size_t n, const std::filesystem::path& path) {
  while (n > 0) {
    const ssize_t wrote = ::write(fd, data, n);
    if (wrote < 0) {
      if (errno == EINTR) continue;  // a signal (SIGINT while saving) must not lose the write
      fail("write", path);
    }
    data += wrote;
    n -= static_cast<size_t>(wrote);
  }
}

// The rename is durable only once the directory entry itself is on disk.
void fsync_dir(const std::filesystem::path& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) fail("sync directory", dir);
}

}  // namespace

std::string file_name_for_step(int64_t global_step) {
  char name[64];
  std::snprintf(name, sizeof(name), "step-%09lld.ckpt", static_cast<long long>(global_step));
  return name;
}

void write_file_atomically(const std::filesystem::path& dir, const std::string& name,
                           const std::vector<uint8_t>& bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create checkpoint directory " + dir.string() + ": " + ec.message());
  const std::filesystem::path final_path = dir / name;
  const std::filesystem::path temp_path = dir / ("." + name + ".tmp" + std::to_string(::getpid()));
  {
    Fd fd(::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) fail("create", temp_path);
    try {
      write_all(fd.get(), bytes.data(), bytes.size(), temp_path);
      if (::fsync(fd.get()) != 0) fail("sync", temp_path);
      if (::close(fd.release()) != 0) fail("close", temp_path);
    } catch (...) {
      std::filesystem::remove(temp_path, ec);
      throw;
    }
  }
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) {
    const int saved = errno;
    std::filesystem::remove(temp_path, ec);
    errno = saved;
    fail("rename into", final_path);
  }
  fsync_dir(dir);
}

std::vector<std::filesystem::path> list(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (is_checkpoint_name(entry.path().filename().string())) files.push_back(entry.path());
  }
  // Zero-padded step numbers sort by name in step order.
  std::sort(files.begin(), files.end());
  return files;
}

std::filesystem::path save(const std::filesystem::path& dir, const Checkpoint& checkpoint, int keep) {
  const std::string name = file_name_for_step(checkpoint.position.global_step);
  write_file_atomically(dir, name, encode(checkpoint));
  std::vector<std::filesystem::path> files = list(dir);
  const size_t kept = static_cast<size_t>(std::max(keep, 1));
  for (size_t i = 0; i + kept < files.size(); ++i) {
    std::error_code ec;
    std::filesystem::remove(files[i], ec);  // an old file left behind is harmless
  }
  return dir / name;
}

std::vector<uint8_t> read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw CheckpointError("cannot open checkpoint " + file.string() + ": " + std::strerror(errno));
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw CheckpointError("cannot read checkpoint " + file.string() + ": " + std::strerror(errno));
  return bytes;
}

Checkpoint load(const std::filesystem::path& file) { return decode(read_file(file), file.string()); }

Loaded load_latest(const std::filesystem::path& dir) {
  const std::vector<std::filesystem::path> files = list(dir);
  std::vector<std::string> refused;
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    try {
      return {*it, load(*it), refused};
    } catch (const CheckpointError& e) {
      refused.push_back(e.what());
    }
  }
  std::string message = "no usable checkpoint in " + dir.string();
  if (files.empty()) message += " (no step-*.ckpt files; train with `checkpoint_dir` first)";
  for (const std::string& why : refused) message += "\n  " + why;
  throw CheckpointError(message);
}

}  // namespace dpt::checkpoint
