#include "dpt/parallel/process_group.h"

#include <cmath>

namespace dpt::parallel {

int agree_on_stop(const ProcessGroup& group, int signal) {
  if (!group.distributed()) return signal;
  // {processes asked to stop, sum of their signal numbers}
  float votes[2] = {signal != 0 ? 1.0f : 0.0f, static_cast<float>(signal)};
  group.comm->allreduce_sum(group.rank, votes, 2);
  if (votes[0] == 0) return 0;
  return signal != 0 ? signal : static_cast<int>(std::lround(votes[1] / votes[0]));
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
