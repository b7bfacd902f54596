#include "dpt/parallel/data_parallel.h"

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

train::StepResult DataParallel::forward_backward(const Tensor& X, const Tensor& y) {
  const std::vector<Shard> shards = split_batch(X, y, devices());
  std::vector<train::StepResult> per_device(shards.size());
  const float inverse_batch = 1.0f / static_cast<float>(X.dim(0));
  pool_.run_all([&](int rank) {
    nn::Module& net = *replicas_[rank];
    const Tensor logits = net(shards[rank].X);
    const Tensor loss = ops::cross_entropy(logits, shards[rank].y, ops::Reduction::sum);
    loss.backward();
    allreduce_gradients(*comm_, rank, net.parameters(), flat_buffers_[rank], inverse_batch);
    const std::vector<Tensor> buffers = net.buffers();
    if (!buffers.empty()) {
      allreduce_tensors(*comm_, rank, buffers, flat_buffers_[rank], 1.0f / static_cast<float>(replicas_.size()));
    }
    per_device[rank] = {loss.item(), ops::count_correct(logits.detach(), shards[rank].y), shards[rank].X.dim(0)};
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
    const std::vector<Shard> shards = split_batch(batch.images, batch.labels, devices());
    pool_.run_all([&](int rank) {
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
