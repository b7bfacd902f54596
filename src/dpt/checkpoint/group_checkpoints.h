// Checkpoints of a multi-process job without shared storage. The replicas are equal, so any
// host can keep the whole checkpoint: a checkpoint directory with "{host}" in it is
// expanded on each rank with its host's name, the lowest rank on each host writes there,
// and resuming takes the newest checkpoint any rank holds, sent over the job's
// communicator to the ranks that do not have it (which keep a copy). Any surviving host
// can then resume the job, the one rank 0 ran on gone or not.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dpt/checkpoint/checkpoint_dir.h"
#include "dpt/parallel/communicator.h"

namespace dpt::checkpoint {

inline constexpr const char* kHostPlaceholder = "{host}";

// Whether `dir` names one directory per host ("{host}" in it).
bool per_host(const std::string& dir);

// `dir` with each "{host}" replaced by this machine's host name.
std::filesystem::path expand_host(const std::string& dir);

// Whether this rank writes the checkpoints of `dir`: with per-host directories the lowest
// rank on each host, otherwise rank 0. A collective in a job with per-host directories
// (every rank's host name is gathered).
bool writes_checkpoints(const parallel::ProcessGroup& group, const std::string& dir);

// The newest checkpoint that decodes in any rank's `dir` (expanded), on every rank: each
// rank looks in its own, and the lowest rank holding the newest step sends its file to the
// others; those that write checkpoints (`keeps_copies`) store it in their own directory.
// When no rank holds one: nothing if `none_is_ok`, else CheckpointError, on every rank
// alike; with `refused_when_none`, why this rank's files were refused. `run_id`: as
// load_latest's. A collective in a job; otherwise load_latest(dir, run_id).
std::optional<Loaded> load_latest_in_group(const parallel::ProcessGroup& group, const std::filesystem::path& dir,
                                           bool keeps_copies, bool none_is_ok = false,
                                           const std::optional<std::string>& run_id = std::nullopt,
                                           std::vector<std::string>* refused_when_none = nullptr);

}  // namespace dpt::checkpoint
