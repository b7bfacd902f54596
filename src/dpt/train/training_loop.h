// The epoch loop both APIs share: shuffled minibatches, the divergence guard on each
// update (read lazily on GPUs: ledger_reads.h), progress callbacks, evaluation after each epoch, checkpoints (every N steps
// and after every epoch), resuming from the newest checkpoint, and stopping cleanly when
// asked (SIGINT/SIGTERM). What differs between the APIs, computing a step and what a
// checkpoint holds, sits behind Trainable.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dpt/checkpoint/checkpoint.h"
#include "dpt/data/dataset.h"
#include "dpt/data/loader.h"
#include "dpt/optim/lr_schedule.h"
#include "dpt/parallel/process_group.h"
#include "dpt/parallel/replica_group.h"
#include "dpt/train/divergence_guard.h"
#include "dpt/train/stats.h"

namespace dpt::train {

// A model being trained data-parallel, as the loop drives it.
class Trainable {
 public:
  virtual ~Trainable() = default;
  // Forward and backward of the global batch (X, y) and the gradient allreduce: every
  // replica then holds the same gradient. Nothing is updated yet. Returns the batch's
  // figures (read back at once).
  virtual StepResult compute_gradients(const Tensor& X, const Tensor& y) = 0;
  // What the loop calls with each batch of its loader: the global batch unless the model
  // is one process of a multi-process job (data_shard), whose batches are its shards.
  // With gradient accumulation every micro-batch but an update's last is GradientSync::later:
  // its gradients are kept and the next call's added to them (parallel::GradientSync).
  // The figures stay on the devices, for read_ledger.
  virtual void compute_batch_gradients(const data::Batch& batch, parallel::GradientSync sync) = 0;
  // Queues the devices' finite check of the update the last GradientSync::now call left,
  // tagged `tag` (parallel::ReplicaGroup::check_finite).
  virtual void check_finite(int64_t tag) = 0;
  // The figures and the first non-finite update since the last read (a collective in a
  // multi-process job); waits for the devices.
  virtual parallel::StepLedger read_ledger() = 0;
  // Whether read_ledger costs nothing: every device is a CPU (ledger_reads.h).
  virtual bool ledger_reads_are_free() const = 0;
  // Shard {index, count} of every global batch this process reads: {rank, processes} in a
  // multi-process job, where every process shuffles with the same seed (a distributed
  // sampler); {0, 1} otherwise.
  virtual std::pair<int64_t, int64_t> data_shard() const { return {0, 1}; }
  // Deterministic mode's chunk size (0: off): shards hold whole chunks, and checkpoints
  // record it, since resuming exactly needs the same one.
  virtual int64_t deterministic_chunk() const { return 0; }
  // This process's place in a multi-process job (by default none): who writes checkpoints
  // (checkpoint/group_checkpoints.h) and where resuming finds them.
  virtual const parallel::ProcessGroup& process_group() const {
    static const parallel::ProcessGroup none;
    return none;
  }
  // The bytes this process's devices have received from the other replicas so far, by
  // level (within the process, between processes): the metrics' per-epoch wire volume.
  virtual parallel::WireBytes wire_bytes() const { return {}; }
  // The stop request every process acts on after this step: in a multi-process job, one
  // process's SIGINT/SIGTERM stops them all after the same step.
  virtual int agree_on_stop(int signal) { return signal; }
  // Every process's `digest`, indexed by rank (a collective in a multi-process job; there
  // the loop checks after every epoch that all replicas hold the same state).
  std::vector<uint64_t> gather_digests(uint64_t digest) const {
    return parallel::gather_digests(process_group(), digest);
  }
  // The gradients compute_gradients left, by parameter name (one replica's; all are equal).
  virtual std::vector<std::pair<std::string, Tensor>> named_gradients() const = 0;
  // The optimizer step on every replica.
  virtual void apply_update() = 0;
  // The learning rate of the next apply_update() (the loop sets it before each, from the
  // schedule).
  virtual void set_learning_rate(float lr) = 0;
  // Fraction of `data` predicted right.
  virtual double evaluate(const data::Dataset& data, int64_t batch_size) = 0;
  virtual void set_training(bool /*on*/) {}
  virtual std::vector<std::string> device_names() const = 0;
  // Parameters, buffers and optimizer state into / out of a checkpoint. save_state is a
  // collective in a multi-process job (a sharded optimizer gathers its state): every
  // process calls it, writer or not.
  virtual void save_state(checkpoint::Checkpoint& into) const = 0;
  virtual void load_state(const checkpoint::Checkpoint& from, const std::string& source) = 0;
};

struct ResumeInfo {
  std::filesystem::path file;
  checkpoint::Position position;
  std::vector<std::string> written_on;  // devices
  std::vector<EpochStats> history;
};

// How a run is checkpointed, resumed, guarded and stopped; validate(RunOptions) (config.h) checks it.
struct RunOptions {
  std::string checkpoint_dir;    // empty: no checkpoints
  int64_t checkpoint_every = 0;  // also every N steps (0: after each epoch only)
  int keep_checkpoints = 2;      // the newest ones; older ones are deleted
  // A checkpoint_dir with "{host}" in it: one directory per host, no shared storage needed
  // (checkpoint/group_checkpoints.h).
  bool resume = false;           // continue from the newest usable checkpoint in checkpoint_dir
  bool start_if_none = false;    // resume: start from the first step when no rank finds one
  // resume: the run to continue (its id, as checkpoint-info prints it); empty: the one run
  // whose checkpoints the folder holds (refused when it holds several).
  std::string resume_run;
  // A fresh run in a checkpoint_dir that holds another run's checkpoints: refused unless
  // this is set; then both runs' files stay, each run pruning only its own.
  bool share_checkpoint_dir = false;
  OnNan on_nan = OnNan::stop;
  int prefetch = 2;  // training batches filled ahead of the step (BatchLoader::set_prefetch)
  // Multi-process: after every epoch, stop when a rank's replica differs from rank 0's
  // (off only in tests that measure what a broken allreduce does to accuracy).
  bool check_replicas = true;
  std::function<int()> stop_signal;                  // polled after each step; nonzero stops
  std::function<void(const std::string&)> warn;      // skipped steps, refused checkpoints
  std::function<void(const ResumeInfo&)> on_resume;  // before the first step of a resumed run
};

// Thrown after a stop request, once the step is finished and the checkpoint written.
class TrainingInterrupted : public std::runtime_error {
 public:
  TrainingInterrupted(const std::string& message, int signal) : std::runtime_error(message), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

// How one run trains, for both APIs (the concise train() and the scratch trainer's
// ScratchConfig::training): the one options struct of a run; validate(TrainOptions)
// (config.h) checks it. The learning rate is not here: the concise API takes it from its
// optimizer, the scratch API from ScratchConfig::lr.
struct TrainOptions {
  int epochs = 10;
  int64_t batch_size = 256;  // of one micro-batch: an update trains on batch_size * accumulate
  uint64_t seed = 0;         // shuffling (and the scratch API's parameter init)
  // Recorded in checkpoints; resuming checks it. The registry's name of the model (nn/registry.h)
  // lets `dptrain evaluate` and `export` rebuild it; the scratch API records kScratchModelName.
  std::string model;
  // The learning rate of every update: schedule(global step) from the base lr, scaled by the
  // examples of one update (optim/lr_schedule.h). Recorded in checkpoints; resuming checks it.
  optim::LrSchedule schedule;
  optim::LrScaling lr_scaling = optim::LrScaling::none;
  // Micro-batches per update (gradient accumulation); an epoch's last update may have fewer.
  // A step (global_step, checkpoint_every) is one update.
  int accumulate = 1;
  // Further settings that change the result (the optimizer's parameters, the loss, the
  // arithmetic), by field name: recorded in checkpoints beside the learning rate, which the
  // loop records itself, and compared on resume, where a difference is refused naming it.
  std::vector<std::pair<std::string, std::string>> recorded_settings;
  RunOptions run;  // checkpoints, resume, on_nan, stopping, progress hooks
};

// A float setting as checkpoints record it: the shortest text that reads back as the same
// float ("0.2"), so that equal settings compare equal as text.
std::string setting_text(float value);

struct LoopResult {
  std::vector<EpochStats> history;  // every epoch, those of a resumed checkpoint included
  double train_seconds = 0;         // in this invocation
  int64_t examples_trained = 0;     // in this invocation
  int64_t skipped_steps = 0;        // on_nan skip
};

// Called after each step with the epoch (1-based), the step (1-based), the steps in the
// epoch and the running mean loss and accuracy: for a progress bar.
using StepCallback = std::function<void(int epoch, int64_t step, int64_t steps, double loss, double acc)>;
using EpochCallback = std::function<void(const EpochStats&)>;

// Trains `model` as `options` say from the base learning rate `lr` (the schedule's, and
// the divergence advice's).
LoopResult run_training(Trainable& model, const data::Dataset& train_data, const data::Dataset& test_data,
                        const TrainOptions& options, float lr, const EpochCallback& on_epoch = {},
                        const StepCallback& on_step = {});

}  // namespace dpt::train
