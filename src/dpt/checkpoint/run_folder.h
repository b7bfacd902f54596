// A checkpoint folder as one run's: what a run does with its folder before its first step.
// - It takes the folder's lock (.dptrain.lock, flock): a second run on the same folder at
//   once is refused, and a run that is killed holds nothing (the kernel drops the lock).
// - It removes the temporary files of writers that were killed mid-write (.step-*.ckpt.tmp*):
//   under the lock no other writer can own one.
// - A fresh run draws a run id; it writes it into every checkpoint, and prunes and resumes
//   only checkpoints of its id (checkpoint_dir.h). A fresh run in a folder that holds
//   another run's checkpoints is refused unless told to share the folder.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace dpt::checkpoint {

inline constexpr const char* kLockFileName = ".dptrain.lock";

// Checks, creating nothing, that this process could create `dir` and write in it: it is a
// folder it can write, or the nearest folder above it that exists is. Throws
// CheckpointError naming the folder, the system's reason and the fix (a file in its place,
// a read-only file system, no permission).
void check_folder(const std::filesystem::path& dir);

// Holds the folder's lock until destroyed, creating the folder if needed. Throws
// CheckpointError naming the folder, the system's reason and the fix when the folder cannot
// be created or written (a file in its place, a read-only file system), or when another
// process holds the lock (naming that process).
class FolderLock {
 public:
  // `patience`: how long a held lock is tried again before the refusal, for a process
  // restarted just as its predecessor exits (mpirun may return before every rank has).
  explicit FolderLock(const std::filesystem::path& dir, std::chrono::milliseconds patience = {});
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

// Removes the temporary files killed writers left in `dir`; returns their names. Call it
// only while holding the folder's lock.
std::vector<std::string> remove_orphaned_temporaries(const std::filesystem::path& dir);

// A new run id: 16 hex digits from the system's random source.
std::string new_run_id();

// Throws CheckpointError when `dir` holds checkpoints (of another run, since a fresh run
// has written none yet), naming them and the three ways on: `resume` them, a fresh
// `checkpoint_dir`, or `share_checkpoint_dir`.
void refuse_foreign_checkpoints(const std::filesystem::path& dir);

}  // namespace dpt::checkpoint
