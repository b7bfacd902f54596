#include "dpt/parallel/process_group.h"

#include <cstdint>

namespace dpt::parallel {

int agree_on_stop(const ProcessGroup& group, int signal) {
  if (!group.distributed()) return signal;
  // The maximum, not a mean: a mean of different signals names one nobody sent (SIGINT and
  // SIGTERM average to 9, SIGKILL), and an exact integer needs no float rounding.
  int64_t agreed = signal;
  group.comm->allreduce(group.rank, &agreed, 1, ReduceOp::max);
  return static_cast<int>(agreed);
}

std::vector<uint64_t> gather_digests(const ProcessGroup& group, uint64_t digest) {
  if (!group.distributed()) return {digest};
  std::vector<int64_t> all(static_cast<size_t>(group.size()), 0);
  all[static_cast<size_t>(group.rank)] = static_cast<int64_t>(digest);
  group.comm->allreduce(group.rank, all.data(), all.size(), ReduceOp::sum);
  return {all.begin(), all.end()};
}

std::vector<std::string> device_names(const std::vector<Device>& devices, const ProcessGroup& group) {
  std::vector<std::string> names;
  if (!group.distributed()) {
    for (const Device& d : devices) names.push_back(d.str());
    return names;
  }
  for (int rank = 0; rank < group.size(); ++rank)
    names.push_back("rank " + std::to_string(rank) + " " + devices[0].str());
  return names;
}

}  // namespace dpt::parallel
