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

// The file name of the checkpoint taken after `global_step` steps: step-000000042.ckpt, or
// with a run id step-000000042-3f2a9c01d4e5b677.ckpt (save() names a file so when another
// run's file has the plain name).
std::string file_name_for_step(int64_t global_step, const std::string& run_id = "");

// Writes `bytes` to dir/name atomically (see above), creating `dir` if needed; throws
// std::runtime_error naming the path and the system's reason.
void write_file_atomically(const std::filesystem::path& dir, const std::string& name,
                           const std::vector<uint8_t>& bytes);

// Encodes and writes `checkpoint` as dir/step-N.ckpt, then deletes all but the newest
// `keep` checkpoints of its run (Checkpoint::run_id): another run's files in the folder
// are never touched. Returns the new file's path.
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

// The newest checkpoint in `dir` of run `run_id` that decodes; newer damaged files are
// skipped and their errors listed in `refused`. Without `run_id`: of the one run the folder
// holds, and CheckpointError naming each run when it holds several. Throws CheckpointError
// when there is none: the message says what was found and why each was refused.
Loaded load_latest(const std::filesystem::path& dir, const std::optional<std::string>& run_id = std::nullopt);

// As load_latest, but nothing when no file of the run decodes, with why each file was
// refused in `refused` (CheckpointError still for a folder of several runs without `run_id`).
std::optional<Loaded> find_latest(const std::filesystem::path& dir, const std::optional<std::string>& run_id,
                                  std::vector<std::string>& refused);

// The message of load_latest's CheckpointError when there is none.
std::string none_usable_message(const std::filesystem::path& dir, const std::optional<std::string>& run_id,
                                const std::vector<std::string>& refused);

// The runs whose checkpoints `dir` holds, each with its newest file, newest step first.
struct RunFiles {
  std::string run_id;  // "" for files written before runs were recorded
  std::filesystem::path newest;
  int64_t files = 0;
};
std::vector<RunFiles> runs_in(const std::filesystem::path& dir);

// "run 3f2a9c01d4e5b677: newest step-000000256.ckpt, 2 files".
std::string describe(const RunFiles& run);

}  // namespace dpt::checkpoint
