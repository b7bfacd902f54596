#include "dpt/checkpoint/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include "dpt/checkpoint/checkpoint_dir.h"

namespace dpt::checkpoint {
namespace {

// The pid a lock file names ("pid 1234"), or "" when it names none.
std::string holder_of(int fd) {
  char text[64] = {};
  const ssize_t got = ::pread(fd, text, sizeof text - 1, 0);
  return got > 0 ? std::string(text, static_cast<size_t>(got)) : std::string();
}

[[noreturn]] void unusable(const std::filesystem::path& dir, const std::string& why) {
  throw CheckpointError("cannot use checkpoint directory " + dir.string() + " (" + why +
                        "); pass `checkpoint_dir` a folder this process can create and write");
}

}  // namespace

void check_folder(const std::filesystem::path& dir) {
  std::filesystem::path at = dir.empty() ? "." : dir;
  std::error_code ec;
  while (!std::filesystem::exists(at, ec) && at.has_relative_path() && at != at.parent_path()) {
    at = at.parent_path().empty() ? std::filesystem::path(".") : at.parent_path();
  }
  if (!std::filesystem::is_directory(at, ec)) unusable(dir, at == dir ? "a file is in its place" : "Not a directory");
  // access() answers for the file system too: a read-only mount is EROFS even for root.
  if (::access(at.c_str(), W_OK | X_OK) != 0) unusable(dir, std::strerror(errno));
}

FolderLock::FolderLock(const std::filesystem::path& dir, std::chrono::milliseconds patience) {
  check_folder(dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) unusable(dir, ec.message());
  const std::filesystem::path file = dir / kLockFileName;
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw CheckpointError("cannot write in checkpoint directory " + dir.string() + " (" + std::strerror(errno) +
                          "); pass `checkpoint_dir` a folder this process can write");
  }
  const auto give_up = std::chrono::steady_clock::now() + patience;
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int saved = errno;
    const std::string holder = holder_of(fd_);
    ::close(fd_);
    fd_ = -1;
    if (saved != EWOULDBLOCK) {
      throw CheckpointError("cannot lock checkpoint directory " + dir.string() + " (" + std::strerror(saved) +
                            "); pass `checkpoint_dir` a folder on a local file system");
    }
    throw CheckpointError("checkpoint directory " + dir.string() + " is in use by another run" +
                          (holder.empty() ? std::string() : " (" + holder + ")") +
                          "; two runs in one folder would replace each other's checkpoints: wait for it to end, "
                          "or pass a fresh `checkpoint_dir`");
  }
  const std::string text = "pid " + std::to_string(::getpid());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    const int saved = errno;
    ::close(fd_);
    fd_ = -1;
    throw CheckpointError("cannot write in checkpoint directory " + dir.string() + " (" + std::strerror(saved) +
                          "); pass `checkpoint_dir` a folder this process can write");
  }
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

std::vector<std::string> remove_orphaned_temporaries(const std::filesystem::path& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    // What write_file_atomically names its temporary: ".step-N.ckpt.tmpPID".
    if (name.starts_with(".step-") && name.find(".ckpt.tmp") != std::string::npos) {
      std::error_code remove_ec;
      if (std::filesystem::remove(entry.path(), remove_ec)) removed.push_back(name);
    }
  }
  return removed;
}

std::string new_run_id() {
  std::random_device source;
  const uint64_t id = (uint64_t{source()} << 32) ^ source();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(id));
  return text;
}

void refuse_foreign_checkpoints(const std::filesystem::path& dir) {
  const std::vector<RunFiles> runs = runs_in(dir);
  const std::vector<std::filesystem::path> files = list(dir);
  if (files.empty()) return;
  std::string held;
  for (const RunFiles& run : runs) held += (held.empty() ? "" : ", ") + describe(run);
  if (held.empty()) held = std::to_string(files.size()) + " file(s) that do not read";
  throw CheckpointError("checkpoint directory " + dir.string() + " already holds another run's checkpoints (" + held +
                        "); pass `resume` to continue that run, a fresh `checkpoint_dir` for a new one, or "
                        "`share_checkpoint_dir` to write beside them (each run prunes only its own)");
}

}  // namespace dpt::checkpoint
