#include "dpt/parallel/data_parallel.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>

#include "dpt/autograd/node.h"
#include "dpt/data/loader.h"
#include "dpt/ops/ops.h"
#include "dpt/parallel/allreduce.h"
#include "dpt/parallel/replicate.h"

namespace dpt::parallel {

DataParallel::DataParallel(std::unique_ptr<nn::Module> module, std::vector<Device> devices,
                           const std::string& allreduce, int cores)
    : pool_(devices, cores),
      comm_(make_in_process_communicator(allreduce, static_cast<int>(devices.size()))),
      flat_buffers_(devices.size()) {
  if (!module) throw std::invalid_argument("DataParallel: no module");
  replicas_.push_back(std::move(module));
  for (size_t i = 1; i < devices.size(); ++i) replicas_.push_back(replicas_[0]->clone());
  // A failing device releases its peers from the allreduce instead of hanging them.
  pool_.set_abort_hook([this] { comm_->abort("another device failed during the step"); });
}

namespace {
// The devices a batch of `examples` is split over: all of them, or only the first
// `examples` when the batch is smaller (the last, partial batch of an epoch or of the test
// set, e.g. 10,000 test images in batches of 9,999 on 2 devices), so that it still runs.
std::vector<Device> devices_for(const std::vector<Device>& devices, int64_t examples) {
  // At least one: an empty batch gets split_batch's own message.
  const auto used = static_cast<size_t>(std::clamp<int64_t>(examples, 1, static_cast<int64_t>(devices.size())));
  return {devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(used)};
}
}  // namespace

train::StepResult DataParallel::forward_backward(const Tensor& X, const Tensor& y) {
  const std::vector<Shard> shards = split_batch(X, y, devices_for(devices(), X.dim(0)));
  const int active = static_cast<int>(shards.size());
  std::vector<train::StepResult> per_device(shards.size());
  const float inverse_batch = 1.0f / static_cast<float>(X.dim(0));
  pool_.run_all([&](int rank) {
    nn::Module& net = *replicas_[rank];
    // An earlier step's gradient is already summed over the replicas: allreducing it again
    // would count it N times, so every step starts from zero.
    net.zero_grad();
    const std::vector<Tensor> buffers = net.buffers();
    Tensor logits, loss;
    if (rank < active) {
      logits = net(shards[rank].X);
      loss = ops::cross_entropy(logits, shards[rank].y, ops::Reduction::sum);
      loss.backward();
    } else {
      // A device without examples still joins the collectives, adding nothing: no
      // gradient (zeros), and zeroed buffers, so the average is over the active replicas.
      for (const Tensor& b : buffers) std::fill_n(b.data<float>(), b.numel(), 0.0f);
    }
    allreduce_gradients(*comm_, rank, net.parameters(), flat_buffers_[rank], inverse_batch);
    if (!buffers.empty()) {
      allreduce_tensors(*comm_, rank, buffers, flat_buffers_[rank], 1.0f / static_cast<float>(active));
    }
    if (rank < active) {
      per_device[rank] = {loss.item(), ops::count_correct(logits.detach(), shards[rank].y), shards[rank].X.dim(0)};
    }
  });
  train::StepResult total;
  for (const train::StepResult& part : per_device) total += part;
  return total;
}

int64_t DataParallel::count_correct(const data::Dataset& data, int64_t batch_size) {
  std::vector<int64_t> correct(replicas_.size(), 0);
  data::BatchLoader loader(data, batch_size, /*shuffle=*/false, 0);
  loader.start_epoch(0);
  data::Batch batch;
  while (loader.next(batch)) {
    const std::vector<Shard> shards =
        split_batch(batch.images, batch.labels, devices_for(devices(), batch.labels.dim(0)));
    pool_.run_all([&](int rank) {
      if (rank >= static_cast<int>(shards.size())) return;
      autograd::NoGradGuard no_grad;
      correct[rank] += ops::count_correct((*replicas_[rank])(shards[rank].X), shards[rank].y);
    });
  }
  int64_t total = 0;
  for (int64_t c : correct) total += c;
  return total;
}

std::vector<std::vector<Tensor>> DataParallel::replica_parameters() const {
  std::vector<std::vector<Tensor>> params;
  for (const auto& replica : replicas_) params.push_back(replica->parameters());
  return params;
}

void DataParallel::train(bool on) {
  for (auto& replica : replicas_) replica->train(on);
}

}  // namespace dpt::parallel
