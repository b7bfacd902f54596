#include "dpt/parallel/replica_group.h"

#include <algorithm>
#include <stdexcept>

#include "dpt/autograd/engine.h"
#include "dpt/core/config_error.h"
#include "dpt/core/trace.h"
#include "dpt/ops/ledger.h"
#include "dpt/ops/ops.h"
#include "dpt/ops/precision.h"
#include "dpt/parallel/allreduce.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/process_group.h"

namespace dpt::parallel {

void check_replica_modes(const ReplicaGroupOptions& options) {
  if (options.deterministic_chunk > 0 && options.sync_bn) {
    throw ConfigError("sync_bn",
                      "`sync_bn` and `deterministic` exclude each other: `deterministic` normalizes every chunk "
                      "with its own statistics");
  }
  if (options.deterministic_chunk > 0 && options.bucket_mb > 0) {
    throw ConfigError("deterministic",
                      "`deterministic` sums the gradients in a fixed tree after backward, so it cannot overlap "
                      "them with backward in buckets: leave `bucket_mb` at 0");
  }
  if (options.compression == Compression::bf16 && options.deterministic_chunk > 0) {
    throw ConfigError("grad_compression",
                      "`grad_compression` bf16 and `deterministic` exclude each other: bf16 rounds each process's "
                      "partial sums, which depend on how many processes there are, so the bits could not stay "
                      "those of one device");
  }
  if (options.zero != 0 && options.zero != 1) {
    throw ConfigError("zero", "`zero` must be 0 (off) or 1 (the optimizer state sharded), got " +
                                  std::to_string(options.zero));
  }
  if (options.zero == 1 && options.bucket_mb > 0) {
    throw ConfigError("zero",
                      "`zero` 1 reduce-scatters the gradients after backward, and the buckets would allreduce them "
                      "during it: leave `bucket_mb` at 0");
  }
  if (options.sync_bn && options.bucket_mb > 0) {
    throw ConfigError("sync_bn",
                      "`sync_bn` allreduces BatchNorm's statistics during backward, which the gradient buckets "
                      "would overlap: leave `bucket_mb` at 0");
  }
}

void check_replica_devices(const std::vector<Device>& devices, const ReplicaGroupOptions& options) {
  check_replica_modes(options);
  if (devices.empty()) throw ConfigError("devices", "`devices` names no device");
  check_devices_for_training(devices, options.bucket_mb);
  if (options.compression != Compression::none && !options.process_group.distributed()) {
    throw ConfigError("grad_compression",
                      "`grad_compression` bf16 compresses the gradients that travel between processes, and one "
                      "process sends none: use it with `dist` mpi");
  }
  for (const Device& d : devices) {
    if (d.kind != Device::Kind::cpu && options.sync_bn) {
      throw ConfigError("sync_bn", "`sync_bn` runs on CPU devices only, got " + d.str());
    }
    if (d.kind != Device::Kind::cpu && options.compression != Compression::none) {
      throw ConfigError("grad_compression", "`grad_compression` bf16 runs on CPU devices only, got " + d.str());
    }
    if (d.kind != Device::Kind::cpu && options.zero != 0) {
      throw ConfigError("zero", "`zero` 1 runs on CPU devices only, got " + d.str());
    }
  }
}

namespace {
// Deterministic mode computes every chunk on one thread, whatever the cores: a chunk's
// kernels then reduce in the same order on any number of devices.
int cores_for(const ReplicaGroupOptions& options, const std::vector<Device>& devices) {
  return options.deterministic_chunk > 0 ? static_cast<int>(devices.size()) : options.cores;
}

// The run's execution options for the device threads: cuDNN plans only deterministic
// algorithms in deterministic mode.
ops::ExecutionOptions execution_for(const ReplicaGroupOptions& options) {
  ops::ExecutionOptions execution = options.execution.value_or(ops::execution());
  execution.deterministic = execution.deterministic || options.deterministic_chunk > 0;
  return execution;
}
}  // namespace

namespace {
// One process: its devices' communicator. Several: the processes' communicator, or with
// several devices per process the two levels of both. The processes' communicator sums
// host memory, so under it the devices of a process sum on the host too (the in-process
// `allreduce` algorithm, GPUs included: their gradients cross to the host once per step).
std::shared_ptr<Communicator> communicator_for(const std::vector<Device>& devices, const ReplicaGroupOptions& options) {
  check_replica_devices(devices, options);
  const ProcessGroup& group = options.process_group;
  if (!group.distributed()) return make_communicator(devices, options.allreduce);
  if (devices.size() == 1) return group.comm;
  return std::make_shared<HierarchicalCommunicator>(
      make_in_process_communicator(options.allreduce, static_cast<int>(devices.size())), group.comm, group.rank);
}
}  // namespace

ReplicaGroup::ReplicaGroup(std::vector<Device> devices, std::vector<ReplicaTensors> replicas,
                           ReplicaGroupOptions options)
    : options_(std::move(options)),
      pool_(devices, cores_for(options_, devices), execution_for(options_)),
      comm_(communicator_for(devices, options_)),
      hierarchy_(dynamic_cast<HierarchicalCommunicator*>(comm_.get())),
      replicas_(std::move(replicas)),
      flat_buffers_(devices.size()),
      accumulated_(devices.size()) {
  for (const Device& d : devices) ledgers_.push_back(ops::new_ledger(d));
  if (replicas_.size() != devices.size()) {
    throw std::invalid_argument("ReplicaGroup: " + std::to_string(replicas_.size()) + " replicas for " +
                                std::to_string(devices.size()) + " devices");
  }
  if (const size_t bytes = bucket_bytes_from_mb(options_.bucket_mb); bytes > 0) {
    for (size_t i = 0; i < replicas_.size(); ++i) {
      const int device = static_cast<int>(i);
      bucketers_.push_back(std::make_unique<GradientBucketer>(
          *comm_, global_rank(device), replicas_[i].params, bytes,
          trace::LaneName{trace::communication_lane(device), pool_.devices()[i].str() + " allreduce"},
          options_.compression));
    }
  }
  // One failing device must release its peers from the allreduce instead of hanging them.
  pool_.set_abort_hook([this] { comm_->abort("another device failed during the step"); });
  if (options_.process_group.distributed()) broadcast_from_root();
}

// The bucketers' communication threads go before the pool and the communicator they use.
ReplicaGroup::~ReplicaGroup() { bucketers_.clear(); }

void ReplicaGroup::broadcast_from_root() {
  pool_.run_all([&](int device) {
    for (const auto* list : {&replicas_[device].params, &replicas_[device].buffers}) {
      broadcast_tensors(*comm_, global_rank(device), *list, flat_buffers_[device], 0);
    }
  });
}

std::vector<Shard> ReplicaGroup::scatter(const Tensor& X, const Tensor& y) const {
  if (options_.process_group.distributed()) {
    throw std::logic_error(
        "ReplicaGroup: in a multi-process job pass the data::Batch of a sharded BatchLoader, which knows the global "
        "batch size");
  }
  const int64_t chunk = std::max<int64_t>(options_.deterministic_chunk, 1);
  return split_batch(X, y, devices_for(devices(), data::chunks_in(X.dim(0), chunk)), chunk);
}

std::vector<Shard> ReplicaGroup::scatter(const data::Batch& batch) const {
  if (!options_.process_group.distributed()) return scatter(batch.images, batch.labels);
  if (pool_.size() == 1) return {Shard{batch.images, batch.labels, batch.labels, batch.first_row}};
  // This process's shard of the global batch, split over its devices as one process splits
  // a batch (device_share's rows).
  const int64_t rows = batch.images.dim(0);
  if (rows == 0) return {};
  const int64_t chunk = std::max<int64_t>(options_.deterministic_chunk, 1);
  return split_batch(batch.images, batch.labels, devices_for(devices(), data::chunks_in(rows, chunk)), chunk,
                     batch.first_row);
}

data::RowRange ReplicaGroup::device_share(int device, int64_t rows, int64_t chunk) const {
  const ProcessGroup& group = options_.process_group;
  const data::RowRange process = data::shard_rows(rows, group.size(), group.rank, chunk);
  const data::RowRange local = data::shard_rows(process.size(), pool_.size(), device, chunk);
  return {process.begin + local.begin, process.begin + local.end};
}

int ReplicaGroup::active_replicas(int64_t examples) const {
  // split_batch and a sharded loader both give the first min(B, N) replicas examples.
  const int64_t replicas = static_cast<int64_t>(options_.process_group.size()) * pool_.size();
  return static_cast<int>(std::min(examples, replicas));
}

namespace {
int64_t rows_in(const std::vector<Shard>& shards) {
  int64_t rows = 0;
  for (const Shard& s : shards) rows += s.X.dim(0);
  return rows;
}
}  // namespace

void ReplicaGroup::step(const std::vector<Shard>& shards, int64_t global_batch, const ShardForward& forward,
                        float gradient_scale, GradientSync sync) {
  unread_examples_ += rows_in(shards);
  if (deterministic()) {
    deterministic_step(shards, global_batch, forward, gradient_scale, sync);
    accumulating_ = sync == GradientSync::later;
    return;
  }
  if (options_.sync_bn && active_replicas(global_batch) < job_replicas()) {
    throw ConfigError("sync_bn", "`sync_bn` needs examples on every one of the " + std::to_string(job_replicas()) +
                                     " devices in every batch, but a batch of " + std::to_string(global_batch) +
                                     " examples leaves some idle (an epoch's last batch?): choose `batch_size` and "
                                     "`train_limit` so that no batch is smaller than the devices");
  }
  const float buffer_scale = 1.0f / static_cast<float>(std::max(1, active_replicas(global_batch)));
  pool_.run_all([&](int device) {
    const bool has_examples = device < static_cast<int>(shards.size()) && shards[device].X.dim(0) > 0;
    const ReplicaTensors& replica = replicas_[device];
    ShardOutput out;
    compute_and_allreduce(device, has_examples ? &shards[device] : nullptr, forward, gradient_scale, sync, out);
    if (!replica.buffers.empty()) {
      const trace::Span span(trace::Phase::buffers);
      allreduce_tensors(*comm_, global_rank(device), replica.buffers, flat_buffers_[device], buffer_scale);
    }
    if (has_examples) {
      ops::add_step_figures(ledgers_[device], out.loss_sum, out.logits.detach(), shards[device].y);
    }
  });
  accumulating_ = sync == GradientSync::later;
}

void ReplicaGroup::check_finite(int64_t tag) {
  pool_.run_all([&](int device) {
    // After an allreduce every replica holds the same gradient: device 0's says it all.
    // After ZeRO's reduce-scatter each holds the job's sum of its own slice only.
    std::vector<Tensor> grads;
    if (device == 0 || options_.zero == 1) {
      for (const Tensor& p : replicas_[device].params) grads.push_back(p.grad());
    }
    ops::record_non_finite(ledgers_[device], tag, grads);
  });
}

StepLedger ReplicaGroup::read_ledger() {
  // Device order, from zero: the same sums as adding each device's figures as it finished.
  StepLedger ledger;
  std::vector<NonFiniteUpdate> records;
  for (const Tensor& l : ledgers_) {
    const ops::LedgerValues v = ops::take_ledger(l);
    ledger.figures.loss_sum += v.loss_sum;
    ledger.figures.correct += v.correct;
    records.push_back({v.bad_tag, v.bad_cause, v.bad_count, v.bad_first});
  }
  ledger.figures.examples = unread_examples_;
  unread_examples_ = 0;
  if (options_.process_group.distributed()) {
    ledger.figures = job_figures(ledger.figures);
    records = job_records(first_non_finite(records).value_or(NonFiniteUpdate{}));
  }
  ledger.non_finite = first_non_finite(records);
  return ledger;
}

void ReplicaGroup::compute_and_allreduce(int device, const Shard* shard, const ShardForward& forward, float scale,
                                         GradientSync sync, ShardOutput& out) {
  const ReplicaTensors& replica = replicas_[device];
  // An earlier step's gradient is already summed over the replicas: allreducing it again
  // would count it N times, so every step starts from zero, unless the earlier steps kept
  // theirs unreduced (GradientSync::later): backward then adds to them.
  if (!accumulating_) {
    for (const Tensor& p : replica.params) p.zero_grad();
  }
  // A replica without examples still joins the collectives, adding nothing: no gradient
  // (zeros) and zeroed buffers, so that the buffer average is over the active replicas.
  if (shard == nullptr) {
    for (const Tensor& b : replica.buffers) b.copy_from(Tensor::zeros(b.shape(), DType::f32, b.device()));
  }
  std::function<void()> forward_and_backward;
  if (shard != nullptr) {
    forward_and_backward = [&] {
      {
        const trace::Span span(trace::Phase::forward);
        out = forward(device, *shard);
      }
      const trace::Span span(trace::Phase::backward);
      autograd::backward(out.loss_sum);
    };
  }
  if (sync == GradientSync::later) {  // kept on this device until a step allreduces them
    if (forward_and_backward) forward_and_backward();
    return;
  }
  if (!bucketers_.empty()) {  // the sums allreduced while backward runs
    bucketers_[device]->backward_and_allreduce(forward_and_backward, scale);
    return;
  }
  if (forward_and_backward) forward_and_backward();
  const trace::Span span(trace::Phase::allreduce);
  if (options_.zero == 1) {  // each replica's slice only: the sharded optimizer steps it
    reduce_scatter_gradients(*comm_, global_rank(device), replica.params, flat_buffers_[device], scale,
                             options_.compression);
    return;
  }
  allreduce_gradients(*comm_, global_rank(device), replica.params, flat_buffers_[device], scale,
                      options_.compression);
}

StepResult ReplicaGroup::job_figures(const StepResult& local) {
  // Every process reports the job's figures, as one process on N devices would. The loss
  // is summed in float as each device's is; the counts as integers, exact at any size.
  float loss = static_cast<float>(local.loss_sum);
  int64_t counts[2] = {local.correct, local.examples};
  const ProcessGroup& group = options_.process_group;
  pool_.run_on(0, [&] {
    group.comm->allreduce(group.rank, &loss, 1, ReduceOp::sum);
    group.comm->allreduce(group.rank, counts, 2, ReduceOp::sum);
  });
  return {loss, counts[0], counts[1]};
}

bool ReplicaGroup::ledger_reads_are_free() const {
  return std::all_of(ledgers_.begin(), ledgers_.end(), [](const Tensor& l) { return l.device().kind == Device::Kind::cpu; });
}

std::vector<NonFiniteUpdate> ReplicaGroup::job_records(const NonFiniteUpdate& local) {
  // Every rank's record to every rank: each fills its own row of zeros, and an integer sum
  // is then a gather. Only at a read, every few steps: four integers per process.
  const int ranks = options_.process_group.size();
  std::vector<int64_t> rows(static_cast<size_t>(ranks) * 4, 0);
  const size_t mine = static_cast<size_t>(options_.process_group.rank) * 4;
  rows[mine] = local.tag;
  rows[mine + 1] = local.cause;
  rows[mine + 2] = local.count;
  rows[mine + 3] = local.first;
  const ProcessGroup& group = options_.process_group;
  pool_.run_on(0, [&] { group.comm->allreduce(group.rank, rows.data(), rows.size(), ReduceOp::sum); });
  std::vector<NonFiniteUpdate> records;
  for (int r = 0; r < ranks; ++r) records.push_back({rows[r * 4], rows[r * 4 + 1], rows[r * 4 + 2], rows[r * 4 + 3]});
  return records;
}

void ReplicaGroup::update(const std::function<void(int device)>& apply) {
  pool_.run_all([&](int device) {
    const trace::Span span(trace::Phase::update);
    apply(device);
  });
}

int64_t ReplicaGroup::count_correct(const data::Dataset& data, int64_t batch_size, const DeviceForward& forward) {
  return count_correct_split(pool_, options_.process_group, data, batch_size, forward);
}

std::vector<int64_t> ReplicaGroup::confusion(const data::Dataset& data, int64_t batch_size,
                                             const DeviceForward& forward, int64_t classes) {
  return confusion_split(pool_, options_.process_group, data, batch_size, forward, classes);
}

ops::ReplicaSum ReplicaGroup::replica_sum(int i) {
  Communicator* comm = comm_.get();
  const int rank = global_rank(i);
  return {[comm, rank](float* values, size_t n) { comm->allreduce(rank, values, n, ReduceOp::sum); },
          [comm, rank](int64_t* values, size_t n) { comm->allreduce(rank, values, n, ReduceOp::sum); }};
}

int ReplicaGroup::agree_on_stop(int signal) const { return parallel::agree_on_stop(options_.process_group, signal); }

std::vector<std::string> ReplicaGroup::device_names() const {
  return parallel::device_names(devices(), options_.process_group);
}

WireBytes ReplicaGroup::wire_bytes() const {
  WireBytes bytes;
  for (int device = 0; device < pool_.size(); ++device) {
    const size_t all = comm_->bytes_received(global_rank(device));
    const size_t network = hierarchy_ != nullptr ? hierarchy_->bytes_between_processes(global_rank(device))
                           : options_.process_group.distributed() ? all
                                                                  : 0;
    bytes.between_processes += network;
    bytes.within_process += all - network;
  }
  return bytes;
}

}  // namespace dpt::parallel
