#include "dpt/checkpoint/checkpoint_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
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

// "step-" followed by at least 9 digits, optionally "-" and a run id, and ".ckpt": what
// file_name_for_step() writes.
bool is_checkpoint_name(std::string_view name) {
  constexpr std::string_view kPrefix = "step-", kSuffix = ".ckpt";
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return false;
  std::string_view digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (const size_t dash = digits.find('-'); dash != std::string_view::npos) {
    const std::string_view run = digits.substr(dash + 1);
    if (run.empty() || !std::all_of(run.begin(), run.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
      return false;
    digits = digits.substr(0, dash);
  }
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

std::string file_name_for_step(int64_t global_step, const std::string& run_id) {
  char name[64];
  std::snprintf(name, sizeof(name), "step-%09lld", static_cast<long long>(global_step));
  return std::string(name) + (run_id.empty() ? "" : "-" + run_id) + ".ckpt";
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
  std::string name = file_name_for_step(checkpoint.position.global_step);
  std::error_code ec;
  if (std::filesystem::exists(dir / name, ec)) {
    // Another run's file of the same step (a shared folder) is not replaced: this one's name
    // carries its run id. One that does not read is kept too.
    bool own = false;
    try {
      own = read_metadata(dir / name).run_id == checkpoint.run_id;
    } catch (const CheckpointError&) {
    }
    if (!own) name = file_name_for_step(checkpoint.position.global_step, checkpoint.run_id);
  }
  write_file_atomically(dir, name, encode(checkpoint));
  // Only this run's files are pruned: a folder may hold another run's (kept by choice, or
  // copied in), whose step numbers say nothing about this run's.
  std::vector<std::filesystem::path> own;
  for (const std::filesystem::path& file : list(dir)) {
    try {
      if (read_metadata(file).run_id == checkpoint.run_id) own.push_back(file);
    } catch (const CheckpointError&) {
      // A file whose metadata does not read belongs to no known run: left as it is.
    }
  }
  const size_t kept = static_cast<size_t>(std::max(keep, 1));
  for (size_t i = 0; i + kept < own.size(); ++i) {
    std::error_code ec;
    std::filesystem::remove(own[i], ec);  // an old file left behind is harmless
  }
  return dir / name;
}

std::vector<uint8_t> read_file(const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) {
    throw CheckpointError("checkpoint " + file.string() + " is a folder; pass one of its step-*.ckpt files");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw CheckpointError("cannot open checkpoint " + file.string() + ": " + std::strerror(errno));
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw CheckpointError("cannot read checkpoint " + file.string() + ": " + std::strerror(errno));
  return bytes;
}

Checkpoint load(const std::filesystem::path& file) { return decode(read_file(file), file.string()); }

std::vector<RunFiles> runs_in(const std::filesystem::path& dir) {
  std::vector<RunFiles> runs;
  for (const std::filesystem::path& file : list(dir)) {  // oldest first: the last seen is the newest
    std::string id;
    try {
      id = read_metadata(file).run_id;
    } catch (const CheckpointError&) {
      continue;
    }
    auto run = std::find_if(runs.begin(), runs.end(), [&](const RunFiles& r) { return r.run_id == id; });
    if (run == runs.end()) run = runs.insert(runs.end(), RunFiles{id, {}, 0});
    run->newest = file;
    ++run->files;
  }
  std::sort(runs.begin(), runs.end(), [](const RunFiles& a, const RunFiles& b) { return a.newest > b.newest; });
  return runs;
}

std::string describe(const RunFiles& run) {
  return "run " + (run.run_id.empty() ? std::string("(unnamed: written before runs were recorded)") : run.run_id) +
         ": newest " + run.newest.filename().string() + ", " + std::to_string(run.files) + " file" +
         (run.files == 1 ? "" : "s");
}

std::optional<Loaded> find_latest(const std::filesystem::path& dir, const std::optional<std::string>& run_id,
                                  std::vector<std::string>& refused) {
  std::optional<std::string> run = run_id;
  if (!run) {
    const std::vector<RunFiles> runs = runs_in(dir);
    if (runs.size() > 1) {
      std::string message = "checkpoint directory " + dir.string() + " holds the checkpoints of " +
                            std::to_string(runs.size()) + " runs; pass `resume_run` with the id of the one to continue:";
      for (const RunFiles& r : runs) message += "\n  " + describe(r);
      throw CheckpointError(message);
    }
    if (!runs.empty()) run = runs[0].run_id;
  }
  const std::vector<std::filesystem::path> files = list(dir);
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    try {
      Checkpoint c = load(*it);
      if (run && c.run_id != *run) continue;  // another run's
      return Loaded{*it, std::move(c), refused};
    } catch (const CheckpointError& e) {
      refused.push_back(e.what());
    }
  }
  return std::nullopt;
}

std::string none_usable_message(const std::filesystem::path& dir, const std::optional<std::string>& run_id,
                                const std::vector<std::string>& refused) {
  std::string message = "no usable checkpoint in " + dir.string();
  if (list(dir).empty()) message += " (no step-*.ckpt files; train with `checkpoint_dir` first)";
  else if (run_id && refused.empty()) message += " (none of run " + *run_id + ")";
  for (const std::string& why : refused) message += "\n  " + why;
  return message;
}

Loaded load_latest(const std::filesystem::path& dir, const std::optional<std::string>& run_id) {
  std::vector<std::string> refused;
  std::optional<Loaded> found = find_latest(dir, run_id, refused);
  if (!found) throw CheckpointError(none_usable_message(dir, run_id, refused));
  return std::move(*found);
}

}  // namespace dpt::checkpoint
