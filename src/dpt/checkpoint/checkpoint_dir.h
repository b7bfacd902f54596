// A directory of checkpoints, step-000000042.ckpt and so on, written so that a crash or a
// full disk at any moment leaves every earlier checkpoint intact: each file is written
// under a temporary name, flushed to disk (fsync) and only then renamed into place, and
// older checkpoints are deleted only after the new one is in place.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dpt/checkpoint/checkpoint.h"

namespace dpt::checkpoint {

// The file name of the checkpoint taken after `global_step` steps.
std::string file_name_for_step(int64_t global_step);

// Writes `bytes` to dir/name atomically (see above), creating `dir` if needed; throws
// std::runtime_error naming the path and the system's reason.
void write_file_atomically(const std::filesystem::path& dir, const std::string& name,
                           const std::vector<uint8_t>& bytes);

// Encodes and writes `checkpoint` as dir/step-N.ckpt, then deletes all but the newest
// `keep` checkpoints. Returns the new file's path.
std::filesystem::path save(const std::filesystem::path& dir, const Checkpoint& checkpoint, int keep = 2);

// A checkpoint file's bytes, undecoded; throws CheckpointError naming it.
std::vector<uint8_t> read_file(const std::filesystem::path& file);

// Reads and decodes one checkpoint file; throws CheckpointError naming it.
Checkpoint load(const std::filesystem::path& file);

// The checkpoint files in `dir`, oldest first (empty if `dir` does not exist).
std::vector<std::filesystem::path> list(const std::filesystem::path& dir);

struct Loaded {
  std::filesystem::path file;
  Checkpoint checkpoint;
  std::vector<std::string> refused;  // why each newer file was not used
};

// The newest checkpoint in `dir` that decodes; newer damaged files are skipped and their
// errors listed in `refused`. Throws CheckpointError when there is none: the message says
// what was found and why each was refused.
Loaded load_latest(const std::filesystem::path& dir);

}  // namespace dpt::checkpoint
