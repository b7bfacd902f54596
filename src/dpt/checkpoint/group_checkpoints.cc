#include "dpt/checkpoint/group_checkpoints.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "dpt/parallel/process_group.h"

namespace dpt::checkpoint {

bool per_host(const std::string& dir) { return dir.find(kHostPlaceholder) != std::string::npos; }

std::filesystem::path expand_host(const std::string& dir) {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string expanded = dir;
  const std::string placeholder = kHostPlaceholder;
  for (size_t at; (at = expanded.find(placeholder)) != std::string::npos;) expanded.replace(at, placeholder.size(), name);
  return expanded;
}

bool writes_checkpoints(const parallel::ProcessGroup& group, const std::string& dir) {
  if (!per_host(dir)) return group.is_root();
  const std::vector<std::string> dirs = parallel::gather_strings(group, expand_host(dir).string());
  const auto first = std::find(dirs.begin(), dirs.end(), dirs[static_cast<size_t>(group.rank)]);
  return first - dirs.begin() == group.rank;
}

std::optional<Loaded> load_latest_in_group(const parallel::ProcessGroup& group, const std::filesystem::path& dir,
                                           bool keeps_copies, bool none_is_ok, const std::optional<std::string>& run_id,
                                           std::vector<std::string>* refused_when_none) {
  std::optional<Loaded> mine;
  std::string why_none;
  std::vector<std::string> refused;
  try {
    mine = find_latest(dir, run_id, refused);
    if (!mine) why_none = none_usable_message(dir, run_id, refused);  // another rank may hold one
  } catch (const CheckpointError& e) {
    why_none = e.what();
  }
  if (!mine && refused_when_none) *refused_when_none = refused;
  if (!group.distributed()) {
    if (!mine && !none_is_ok) throw CheckpointError(why_none);
    return mine;
  }
  // Steps + 1 (0: none), gathered as digests are: every rank sees every rank's.
  const std::vector<uint64_t> steps =
      parallel::gather_digests(group, mine ? static_cast<uint64_t>(mine->checkpoint.position.global_step) + 1 : 0);
  const auto newest = std::max_element(steps.begin(), steps.end());  // the first, the lowest rank, on ties
  if (*newest == 0) {
    if (none_is_ok) return std::nullopt;
    throw CheckpointError("no rank of the job holds a usable checkpoint; rank " + std::to_string(group.rank) + ": " +
                          why_none);
  }
  const int holder = static_cast<int>(newest - steps.begin());
  const std::string bytes =
      parallel::broadcast_string(group, group.rank == holder ? [&] {
        const std::vector<uint8_t> file = read_file(mine->file);
        return std::string(file.begin(), file.end());
      }() : std::string(), holder);
  if (steps[static_cast<size_t>(group.rank)] == *newest) return *mine;
  const std::string name = file_name_for_step(static_cast<int64_t>(*newest) - 1);
  const std::vector<uint8_t> data(bytes.begin(), bytes.end());
  Loaded loaded{dir / name, decode(data, name + " from rank " + std::to_string(holder)), {}};
  if (keeps_copies) write_file_atomically(dir, name, data);
  if (mine) loaded.refused = mine->refused;
  return loaded;
}

}  // namespace dpt::checkpoint
