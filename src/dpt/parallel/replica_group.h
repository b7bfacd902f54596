// ReplicaGroup: the data-parallel engine both training APIs drive. It owns one worker per
// local device (DevicePool), the communicator joining every replica of the job (the local
// devices, or in a multi-process job the processes), and one replica of the model's
// tensors per device. A step is always the same five moves:
//   scatter   each device gets its shard of the batch (split_batch; in a multi-process
//             job split_batch of this process's shard of the global batch); a device may
//             get none (an epoch's last batch);
//   compute   forward and summed loss through the caller's callback, then backward, on
//             every device at once;
//   allreduce the gradients summed over all replicas, times the caller's scale, as one
//             flat buffer after backward or in buckets while backward runs (with several
//             devices per process in two levels: hierarchical_communicator.h);
//   average   the buffers (BatchNorm running statistics) over the replicas with examples;
//   update    the same optimizer step on every replica (update()).
// Control data (the step's figures, evaluation counts, the stop request) travels on typed
// collectives: integers as integers, never as float sums.
//
// A step never waits for a GPU: each device adds its shard's loss sum and correct count to
// its step ledger (ops/ledger.h) with device ops, and check_finite records there whether an
// update held a NaN or an infinity; read_ledger copies the ledgers to the host only when
// the caller needs the figures (the training loop: every few steps on GPUs, at once on CPUs,
// where reading costs nothing).
//
// Deterministic mode (options.deterministic_chunk = K): the unit of work is a chunk of K
// examples of the global batch (the last one shorter); devices only decide where chunks
// run (whole chunks per device, data::shard_rows). Each chunk's forward and backward runs
// alone (on one thread; on a GPU with deterministic cuDNN algorithms, ops/precision.h),
// with BatchNorm on the chunk's statistics (ghost batch norm), and
// the chunks' gradients and running statistics are summed in one fixed tree over the
// chunk indices (chunk_tree.h), the same for any number of devices or processes: the
// parameters, buffers and momentum end every step with the same bits on 1 or N devices.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dpt/core/tensor.h"
#include "dpt/data/dataset.h"
#include "dpt/data/loader.h"
#include "dpt/nn/loss.h"
#include "dpt/ops/ops.h"
#include "dpt/ops/precision.h"
#include "dpt/parallel/chunk_tree.h"
#include "dpt/parallel/communicator.h"
#include "dpt/parallel/device_pool.h"
#include "dpt/parallel/gradient_bucketer.h"
#include "dpt/parallel/hierarchical_communicator.h"
#include "dpt/parallel/replicate.h"
#include "dpt/parallel/split_evaluation.h"
#include "dpt/parallel/step_ledger.h"
#include "dpt/parallel/step_result.h"

namespace dpt::parallel {

struct ReplicaGroupOptions {
  std::string allreduce = "ring";  // in-process algorithm: naive | ring
  int cores = available_cores();   // split between the CPU devices
  double bucket_mb = 0;            // 0: one allreduce after backward, no overlap
  ProcessGroup process_group;      // distributed: this process's place; each runs every device
  // How the gradients travel between the processes (compression.h): bf16 needs a
  // multi-process job of CPU devices and excludes deterministic mode.
  Compression compression = Compression::none;
  // ZeRO stage: 0 off; 1 shards the optimizer state over the job's replicas
  // (zero_optimizer.h), for which the gradients are reduce-scattered instead of allreduced:
  // each replica gets the job's sum of its slice only. Not with buckets or CUDA devices.
  int zero = 0;
  // > 0: deterministic mode with chunks of this many examples (see below); 0: off.
  int64_t deterministic_chunk = 0;
  // Synchronized BatchNorm (DataParallel): the replicas' forwards and backwards sum
  // BatchNorm statistics over the job (replica_sum), so every replica must get examples in
  // every step. CPU devices, no buckets, no deterministic mode.
  bool sync_bn = false;
  // The loss every shard's forward sums (shard_loss_sum); null: cross-entropy.
  std::shared_ptr<const nn::Loss> loss = nullptr;
  // How the devices compute (ops/precision.h: precision, conv algorithm, fusion); unset:
  // the options of the thread that builds the group. Deterministic mode adds
  // deterministic convolutions.
  std::optional<ops::ExecutionOptions> execution = std::nullopt;
};

// What a replica holds that the group keeps equal: parameters (their gradients are
// allreduced, their initial values broadcast from rank 0) and buffers (averaged after each
// step, broadcast from rank 0 at the start).
// Bytes a process's devices have read from the other replicas since the group began: within
// the process (memory copies between its devices) and between the processes (the network).
struct WireBytes {
  size_t within_process = 0;
  size_t between_processes = 0;
};

struct ReplicaTensors {
  std::vector<Tensor> params;
  std::vector<Tensor> buffers;
};

// One device's forward pass on its shard: the logits and the loss summed over the shard's
// examples (a one-element tensor the group runs backward from).
struct ShardOutput {
  Tensor logits;
  Tensor loss_sum;
};
using ShardForward = std::function<ShardOutput(int device, const Shard& shard)>;

// When a step's gradients are allreduced. Gradient accumulation (N micro-batches per
// update) runs N - 1 steps with `later` and the last with `now`: a `later` step keeps its
// gradients on each device, unreduced, and the next step adds its own to them; the `now`
// step allreduces the sum of every step since the last allreduce, once, times its
// gradient_scale, which is then the gradient of one step on all their examples (as
// PyTorch DDP's no_sync()). In deterministic mode each step's fixed-tree sum is kept and the
// sums are added in step order, so the bits are still the same on any number of devices.
enum class GradientSync { now, later };

// Throws ConfigError unless `options`' modes go together: `sync_bn`, `deterministic` and
// gradient buckets exclude one another; bf16 compression excludes `deterministic`; ZeRO is
// stage 0 or 1, without buckets. Needs no devices, so a front end checks it first.
void check_replica_modes(const ReplicaGroupOptions& options);

// Throws ConfigError unless `devices` can form one group under `options` (its modes first): not empty, kinds
// that train together (device_list.h); compression in a multi-process job of CPU devices;
// ZeRO on CPU devices.
void check_replica_devices(const std::vector<Device>& devices, const ReplicaGroupOptions& options);

class ReplicaGroup {
 public:
  // replicas[i] lives on devices[i]. In a multi-process job every process starts from rank
  // 0's parameters and buffers, whatever each initialised.
  ReplicaGroup(std::vector<Device> devices, std::vector<ReplicaTensors> replicas, ReplicaGroupOptions options);
  ~ReplicaGroup();
  ReplicaGroup(const ReplicaGroup&) = delete;
  ReplicaGroup& operator=(const ReplicaGroup&) = delete;

  // The shards of a batch: (X, y) split over the local devices (a batch of B < N examples
  // over the first B), or in a multi-process job the loader's shard for this process.
  std::vector<Shard> scatter(const Tensor& X, const Tensor& y) const;
  std::vector<Shard> scatter(const data::Batch& batch) const;

  // Forward, backward and gradient allreduce of `shards` (shards[i] on local device i; a
  // missing or empty shard joins the collectives with zero gradients and zeroed buffers).
  // Every parameter's gradient ends as the sum over the job's `global_batch` examples
  // times `gradient_scale`; the buffers as their mean over the replicas with examples.
  // Earlier gradients are dropped first, unless the previous step was GradientSync::later
  // (see there). The step's loss sum and correct count are added to the devices' ledgers,
  // for read_ledger: nothing here waits for a GPU.
  void step(const std::vector<Shard>& shards, int64_t global_batch, const ShardForward& forward,
            float gradient_scale, GradientSync sync = GradientSync::now);
  // Records in the ledgers, on the devices, whether the update whose gradients the last
  // GradientSync::now step left (tagged `tag` > 0) holds a non-finite loss (any device's)
  // or gradient (device 0's: after the allreduce all replicas hold the same; every
  // device's with ZeRO, where each holds the sum of its own slice).
  void check_finite(int64_t tag);
  // The job's figures of every step since the last read and the first non-finite update
  // check_finite recorded since then; zeroes the ledgers. Waits for the devices; a
  // collective in a multi-process job (every rank reads after the same steps).
  StepLedger read_ledger();
  // Whether read_ledger costs nothing: every device is a CPU, with nothing to wait for.
  bool ledger_reads_are_free() const;
  // Whether gradients of GradientSync::later steps are waiting for their allreduce.
  bool holds_unreduced_gradients() const { return accumulating_; }

  // Runs `apply(device)` on every local device's worker at once: the identical update.
  void update(const std::function<void(int device)>& apply);

  // Examples of `data` the replicas classify right, every device and process evaluating
  // its shard of each batch, the counts summed over the job.
  int64_t count_correct(const data::Dataset& data, int64_t batch_size, const DeviceForward& forward);
  // The confusion matrix over `data` (confusion_split), evaluated as count_correct is.
  std::vector<int64_t> confusion(const data::Dataset& data, int64_t batch_size, const DeviceForward& forward,
                                 int64_t classes);

  // Sums over every replica of the job through the communicator, for local device `i`'s
  // synchronized BatchNorm (ops::sync_batch_norm2d); called from that device's worker.
  ops::ReplicaSum replica_sum(int i);

  // The stop request every process acts on after this step (see parallel::agree_on_stop).
  int agree_on_stop(int signal) const;

  const std::vector<Device>& devices() const { return pool_.devices(); }
  const ReplicaTensors& replica(size_t i) const { return replicas_[i]; }
  size_t num_replicas() const { return replicas_.size(); }
  const ProcessGroup& process_group() const { return options_.process_group; }
  const ReplicaGroupOptions& options() const { return options_; }
  Communicator& communicator() { return *comm_; }
  // The bucketer of local device `i` (null without buckets).
  const GradientBucketer* bucketer(size_t i) const { return bucketers_.empty() ? nullptr : bucketers_[i].get(); }
  // The names of the job's devices ("cpu:0", or "rank 1 cpu:0" in a multi-process job).
  std::vector<std::string> device_names() const;
  // This process's communication so far, by level.
  WireBytes wire_bytes() const;
  // Device `local` of process p is replica p * devices + local of the job: its rank in
  // communicator().
  int global_rank(int local) const { return options_.process_group.rank * pool_.size() + local; }

 private:
  // Deterministic mode's share of a step for local `device`, in two levels: this
  // process's shard of the chunks (as with one device per process), cut over its devices
  // as split_batch cuts a batch. `chunk` = 1 gives the chunk indices, K the rows.
  data::RowRange device_share(int device, int64_t rows, int64_t chunk) const;
  // The replicas that have examples in a global batch of `examples`.
  int active_replicas(int64_t examples) const;
  void broadcast_from_root();
  void compute_and_allreduce(int device, const Shard* shard, const ShardForward& forward, float scale,
                             GradientSync sync, ShardOutput& out);
  StepResult job_figures(const StepResult& local);
  std::vector<NonFiniteUpdate> job_records(const NonFiniteUpdate& local);
  bool deterministic() const { return options_.deterministic_chunk > 0; }
  int job_replicas() const { return options_.process_group.size() * pool_.size(); }
  void deterministic_step(const std::vector<Shard>& shards, int64_t global_batch, const ShardForward& forward,
                          float gradient_scale, GradientSync sync);
  // The chunks' gradient and buffer trees of local `device` (their chunks' forward and backward, one by one).
  struct DeviceTrees {
    std::vector<TreeNode> gradients, buffers;
  };
  DeviceTrees chunk_trees(int device, const Shard* shard, int64_t global_batch, const ShardForward& forward);
  // The root sums, on every device: each device's trees summed in the tree's order over
  // the job (tree_sum), or, with several devices per process, merged within the process
  // first and summed over the processes (process_tree_sums).
  void finish_chunks(int device, std::vector<float> gradient, const std::vector<float>& buffers, int64_t chunks,
                     float gradient_scale, GradientSync sync);
  // The root sum of every rank's tree nodes (tree_allreduce.h), on every rank.
  std::vector<float> tree_sum(int device, const std::vector<TreeNode>& mine, int64_t chunks, size_t values);
  std::vector<float> process_tree_sum(std::vector<std::vector<TreeNode>> by_device, int64_t chunks, size_t values);

  ReplicaGroupOptions options_;
  DevicePool pool_;
  std::shared_ptr<Communicator> comm_;
  HierarchicalCommunicator* hierarchy_ = nullptr;  // comm_, when processes run several devices
  std::vector<ReplicaTensors> replicas_;
  std::vector<std::vector<float>> flat_buffers_;  // one per device, reused every step
  std::vector<Tensor> ledgers_;                   // one per device, on it (ops/ledger.h)
  int64_t unread_examples_ = 0;                   // this process's, since the last read_ledger
  bool accumulating_ = false;  // the last step was GradientSync::later
  // Deterministic mode's sums of the GradientSync::later steps' gradients, one per device.
  std::vector<std::vector<float>> accumulated_;
  // One per device with buckets; declared last, so destroyed (threads joined) first.
  std::vector<std::unique_ptr<GradientBucketer>> bucketers_;
};

}  // namespace dpt::parallel
