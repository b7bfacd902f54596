#include "dpt/parallel/split_evaluation.h"

#include <algorithm>

#include "dpt/autograd/node.h"
#include "dpt/data/loader.h"
#include "dpt/ops/ops.h"

namespace dpt::parallel {

std::vector<Device> devices_for(const std::vector<Device>& devices, int64_t examples) {
  // At least one: an empty batch gets split_batch's own message.
  const auto used = static_cast<size_t>(std::clamp<int64_t>(examples, 1, static_cast<int64_t>(devices.size())));
  return {devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(used)};
}

int64_t count_correct_split(DevicePool& pool, Communicator& comm, const ProcessGroup& group, const data::Dataset& data,
                            int64_t batch_size, const DeviceForward& forward) {
  // Every device reads its own shard of each test batch with its own loader (the rows
  // split_batch would give it), so the devices run the whole evaluation side by side with
  // no per-batch hand-off. In a multi-process job each process has one device, and the
  // shards are the job's: shard `rank` of `size`.
  const int64_t shards = static_cast<int64_t>(group.size()) * pool.size();
  std::vector<int64_t> correct(static_cast<size_t>(pool.size()), 0);
  pool.run_all([&](int device) {
    autograd::NoGradGuard no_grad;
    data::BatchLoader loader(data, batch_size, /*shuffle=*/false, 0);
    loader.set_shard(static_cast<int64_t>(group.rank) * pool.size() + device, shards);
    loader.start_epoch(0);
    data::Batch shard;
    while (loader.next(shard)) {
      if (shard.labels.dim(0) == 0) continue;
      const Device where = pool.devices()[static_cast<size_t>(device)];
      correct[device] += ops::count_correct(forward(device, shard.images.to(where)), shard.labels.to(where));
    }
  });
  int64_t total = 0;
  for (int64_t c : correct) total += c;
  if (group.distributed()) {
    // Each process counted its shard of every test batch: an exact i64 sum (a float one
    // rounds above 2^24 examples). Called from device 0's worker, the thread that takes
    // part in every other collective.
    pool.run_on(0, [&] { comm.allreduce(group.rank, &total, 1, ReduceOp::sum); });
  }
  return total;
}

}  // namespace dpt::parallel
