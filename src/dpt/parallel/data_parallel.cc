#include "dpt/parallel/data_parallel.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>

#include "dpt/ops/ops.h"
#include "dpt/parallel/allreduce.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/replicate.h"
#include "dpt/parallel/split_evaluation.h"

namespace dpt::parallel {

DataParallel::DataParallel(std::unique_ptr<nn::Module> module, std::vector<Device> devices,
                           const std::string& allreduce, int cores)
    : DataParallel(std::move(module), std::move(devices), DataParallelOptions{allreduce, cores, 0.0, {}}) {}

namespace {
std::shared_ptr<Communicator> communicator_for(const DataParallelOptions& options, const std::vector<Device>& devices) {
  check_devices_for_training(devices, options.process_group, options.bucket_mb);
  if (!options.process_group.distributed()) return make_communicator(devices, options.allreduce);
  check_one_device_per_process(devices, options.process_group);
  return options.process_group.comm;
}
}  // namespace

DataParallel::DataParallel(std::unique_ptr<nn::Module> module, std::vector<Device> devices, DataParallelOptions options)
    : options_(std::move(options)),
      pool_(devices, options_.cores),
      comm_(communicator_for(options_, devices)),
      flat_buffers_(devices.size()) {
  if (!module) throw std::invalid_argument("DataParallel: no module");
  replicas_.push_back(std::move(module));
  for (size_t i = 1; i < devices.size(); ++i) replicas_.push_back(replicas_[0]->clone());
  // GPU replicas get their own copy of the weights in their GPU's memory (CPU devices
  // share the host's, as they are).
  for (size_t i = 0; i < devices.size(); ++i) {
    if (devices[i].kind == Device::Kind::cuda) replicas_[i]->to(devices[i]);
  }
  const size_t bucket_bytes = bucket_bytes_from_mb(options_.bucket_mb);
  if (bucket_bytes > 0) {
    for (size_t i = 0; i < devices.size(); ++i) {
      bucketers_.push_back(std::make_unique<GradientBucketer>(*comm_, global_rank(static_cast<int>(i)),
                                                              replicas_[i]->parameters(), bucket_bytes));
    }
  }
  // A failing device releases its peers from the allreduce instead of hanging them.
  pool_.set_abort_hook([this] { comm_->abort("another device failed during the step"); });
  if (options_.process_group.distributed()) {
    // Every process starts from rank 0's parameters and buffers, whatever each initialised.
    pool_.run_on(0, [&] {
      for (const Tensor& t : replicas_[0]->parameters())
        comm_->broadcast(global_rank(0), t.data<float>(), t.numel(), 0);
      for (const Tensor& t : replicas_[0]->buffers()) comm_->broadcast(global_rank(0), t.data<float>(), t.numel(), 0);
    });
  }
}

// The bucketers' communication threads go before the pool and the communicator they use.
DataParallel::~DataParallel() { bucketers_.clear(); }

train::StepResult DataParallel::forward_backward(const Tensor& X, const Tensor& y) {
  if (options_.process_group.distributed()) {
    throw std::logic_error(
        "DataParallel: in a multi-process job pass the data::Batch of a sharded BatchLoader, which knows the global "
        "batch size");
  }
  const std::vector<Shard> shards = split_batch(X, y, devices_for(devices(), X.dim(0)));
  return step(shards, X.dim(0), static_cast<int>(shards.size()));
}

train::StepResult DataParallel::forward_backward(const data::Batch& batch) {
  if (!options_.process_group.distributed()) return forward_backward(batch.images, batch.labels);
  const int64_t global_batch = batch.global_size > 0 ? batch.global_size : batch.labels.dim(0);
  const int active = static_cast<int>(std::min<int64_t>(global_batch, options_.process_group.size()));
  const train::StepResult local = step({Shard{batch.images, batch.labels}}, global_batch, active);
  // Every process reports the job's figures, as one process on N devices would.
  float figures[3] = {static_cast<float>(local.loss_sum), static_cast<float>(local.correct),
                      static_cast<float>(local.examples)};
  comm_->allreduce_sum(global_rank(0), figures, 3);
  return {figures[0], static_cast<int64_t>(figures[1]), static_cast<int64_t>(figures[2])};
}

train::StepResult DataParallel::step(const std::vector<Shard>& shards, int64_t global_batch, int active) {
  std::vector<train::StepResult> per_device(replicas_.size());
  const float inverse_batch = 1.0f / static_cast<float>(global_batch);
  pool_.run_all([&](int rank) {
    nn::Module& net = *replicas_[rank];
    // An earlier step's gradient is already summed over the replicas: allreducing it again
    // would count it N times, so every step starts from zero.
    net.zero_grad();
    const std::vector<Tensor> buffers = net.buffers();
    const bool has_examples = rank < static_cast<int>(shards.size()) && shards[rank].X.dim(0) > 0;
    Tensor logits, loss;
    const auto forward_and_backward = [&] {
      logits = net(shards[rank].X);
      loss = ops::cross_entropy(logits, shards[rank].y, ops::Reduction::sum);
      loss.backward();
    };
    if (!has_examples) {
      // A device without examples still joins the collectives, adding nothing: no
      // gradient (zeros), and zeroed buffers, so the average is over the active replicas.
      for (const Tensor& b : buffers) b.copy_from(Tensor::zeros(b.shape(), DType::f32, b.device()));
    }
    if (!bucketers_.empty()) {
      bucketers_[rank]->backward_and_allreduce(has_examples ? std::function<void()>(forward_and_backward) : nullptr,
                                               inverse_batch);
    } else {
      if (has_examples) forward_and_backward();
      allreduce_gradients(*comm_, global_rank(rank), net.parameters(), flat_buffers_[rank], inverse_batch);
    }
    if (!buffers.empty()) {
      allreduce_tensors(*comm_, global_rank(rank), buffers, flat_buffers_[rank], 1.0f / static_cast<float>(active));
    }
    if (has_examples) {
      per_device[rank] = {loss.item(), ops::count_correct(logits.detach(), shards[rank].y), shards[rank].X.dim(0)};
    }
  });
  train::StepResult total;
  for (const train::StepResult& part : per_device) total += part;
  return total;
}

int64_t DataParallel::count_correct(const data::Dataset& data, int64_t batch_size) {
  return count_correct_split(pool_, *comm_, options_.process_group, data, batch_size,
                             [&](int device, const Tensor& X) { return (*replicas_[device])(X); });
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
