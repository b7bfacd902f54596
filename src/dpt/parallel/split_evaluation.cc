#include "dpt/parallel/split_evaluation.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "dpt/autograd/node.h"
#include "dpt/data/loader.h"
#include "dpt/ops/ops.h"

namespace dpt::parallel {

std::vector<Device> devices_for(const std::vector<Device>& devices, int64_t examples) {
  // At least one: an empty batch gets split_batch's own message.
  const auto used = static_cast<size_t>(std::clamp<int64_t>(examples, 1, static_cast<int64_t>(devices.size())));
  return {devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(used)};
}

namespace {

// Runs on_shard(device, logits, labels) for every local device's shard of every batch of
// `data`, all devices at once, without gradients. Every device reads its own shard of each
// test batch with its own loader (the rows split_batch would give it), so the devices run
// the whole evaluation side by side with no per-batch hand-off. In a multi-process job the
// shards are the job's: device d of process p reads shard p * devices + d.
template <typename OnShard>
void for_each_shard(DevicePool& pool, const ProcessGroup& group, const data::Dataset& data, int64_t batch_size,
                    const DeviceForward& forward, const OnShard& on_shard) {
  const int64_t shards = static_cast<int64_t>(group.size()) * pool.size();
  pool.run_all([&](int device) {
    autograd::NoGradGuard no_grad;
    data::BatchLoader loader(data, batch_size, /*shuffle=*/false, 0);
    loader.set_shard(static_cast<int64_t>(group.rank) * pool.size() + device, shards);
    loader.start_epoch(0);
    data::Batch shard;
    while (loader.next(shard)) {
      if (shard.labels.dim(0) == 0) continue;
      const Device where = pool.devices()[static_cast<size_t>(device)];
      on_shard(device, forward(device, shard.images.to(where)), shard.labels.to(where));
    }
  });
}

// Sums `values` over the processes of a multi-process job: an exact i64 sum (a float one
// rounds above 2^24 examples). Called from device 0's worker, the thread that takes part
// in every other collective.
void sum_over_job(DevicePool& pool, const ProcessGroup& group, int64_t* values, size_t count) {
  if (group.distributed()) pool.run_on(0, [&] { group.comm->allreduce(group.rank, values, count, ReduceOp::sum); });
}

}  // namespace

int64_t count_correct_split(DevicePool& pool, const ProcessGroup& group, const data::Dataset& data,
                            int64_t batch_size, const DeviceForward& forward) {
  std::vector<int64_t> correct(static_cast<size_t>(pool.size()), 0);
  for_each_shard(pool, group, data, batch_size, forward, [&](int device, const Tensor& logits, const Tensor& labels) {
    correct[device] += ops::count_correct(logits, labels);
  });
  int64_t total = 0;
  for (int64_t c : correct) total += c;
  sum_over_job(pool, group, &total, 1);
  return total;
}

std::vector<int64_t> confusion_split(DevicePool& pool, const ProcessGroup& group,
                                     const data::Dataset& data, int64_t batch_size, const DeviceForward& forward,
                                     int64_t classes) {
  const auto cells = static_cast<size_t>(classes * classes);
  std::vector<std::vector<int64_t>> per_device(static_cast<size_t>(pool.size()), std::vector<int64_t>(cells, 0));
  for_each_shard(pool, group, data, batch_size, forward, [&](int device, const Tensor& logits, const Tensor& labels) {
    if (logits.ndim() != 2 || logits.dim(1) != classes) {
      throw std::invalid_argument("confusion_split: logits of shape " + shape_str(logits.shape()) + " for " +
                                  std::to_string(classes) + " classes");
    }
    const std::vector<float> values = logits.to(Device::cpu()).to_vector();
    const Tensor host_labels = labels.to(Device::cpu());
    const int64_t* y = host_labels.data<int64_t>();
    std::vector<int64_t>& matrix = per_device[static_cast<size_t>(device)];
    for (int64_t i = 0; i < logits.dim(0); ++i) {
      const float* row = values.data() + i * classes;
      const int64_t predicted = std::max_element(row, row + classes) - row;
      if (y[i] < 0 || y[i] >= classes) throw std::invalid_argument("confusion_split: label outside the classes");
      ++matrix[static_cast<size_t>(y[i] * classes + predicted)];
    }
  });
  std::vector<int64_t> total(cells, 0);
  for (const std::vector<int64_t>& m : per_device) {
    for (size_t c = 0; c < cells; ++c) total[c] += m[c];
  }
  sum_over_job(pool, group, total.data(), cells);
  return total;
}

}  // namespace dpt::parallel
