// Every check of a training configuration, in one place. The library's entry points
// (train_lenet_from_scratch, train, run_training, report::run_job) call these; a front end does
// not check anything itself. Each check throws ConfigError naming the field at fault, in
// messages that spell settings as backquoted field names ("`batch_size` 0 ..."), which a
// front end rewrites into its own names (the CLI: its flags).
//
// The rules about placing work on devices (a batch no smaller than the job's devices, the kinds of devices that train together) are
// stated in parallel/device_list.h, where the engines below train/ can call them too;
// validate() here applies them to a configuration.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "dpt/core/config_error.h"
#include "dpt/data/source.h"
#include "dpt/nn/loss.h"
#include "dpt/ops/precision.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/device_pool.h"
#include "dpt/parallel/replica_group.h"
#include "dpt/train/divergence_guard.h"
#include "dpt/train/train_from_scratch.h"
#include "dpt/train/training_loop.h"

namespace dpt::train {

// The choices of the enum-like fields, by name; help texts list them from here. (Those of
// `init` and `precision` are nn::kInits and ops::kConvPrecisions, those of `lr_schedule` and
// `lr_scaling` optim::kLrSchedules and optim::kLrScalings.)
inline constexpr std::array<std::string_view, 2> kApis{"scratch", "concise"};
inline constexpr std::array<std::string_view, 2> kAllreduces{"naive", "ring"};
inline constexpr std::array<std::string_view, 2> kOnNans{"stop", "skip"};
inline constexpr std::array<std::string_view, 2> kDists{"none", "mpi"};
inline constexpr std::array<std::string_view, 3> kProgresses{"auto", "on", "off"};

// One training job as a front end describes it, before anything is parsed or checked.
// The member names are the field names errors use.
struct JobConfig {
  std::string model = "lenet";   // a name in nn/registry.h's table (lenet, resnet18, or one registered)
  std::string api = "scratch";   // kApis: the lesson's from-scratch loop, or DataParallel + SGD
  std::string devices = "cpu:1"; // parallel::parse_device_list's forms
  int epochs = 10;
  int64_t batch_size = 256;      // global, split across the devices
  float lr = 0.2f;
  std::string optimizer = "sgd";  // optim::kOptimizers; adam and adamw need the concise API
  float momentum = 0.0f;         // concise API only (sgd)
  bool nesterov = false;         // concise API only (sgd with momentum)
  float weight_decay = 0.0f;     // concise API only
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam, adamw
  std::string loss = "cross-entropy";  // nn::kLosses
  float label_smoothing = 0.0f;        // cross-entropy
  std::string init = "lesson";   // nn::kInits; concise API only
  uint64_t seed = 0;             // parameter init and shuffling
  data::DataOptions data;        // where the data comes from and what happens to it (data/source.h)
  std::string allreduce = "ring";  // kAllreduces
  int cores = parallel::available_cores();
  int prefetch = 2;  // training batches filled ahead of the step; 0: none
  std::string metrics_file;      // empty: none
  std::string plot_file;         // empty: none
  std::string checkpoint_dir;    // empty: no checkpoints; "{host}" in it: one directory per host
  int64_t checkpoint_every = 0;
  int keep_checkpoints = 2;
  bool resume = false;
  bool resume_if_any = false;    // resume, or start from the first step when no checkpoint is found
  std::string resume_run;        // resume: the run id to continue; empty: the folder's one run
  bool share_checkpoint_dir = false;  // a fresh run may write beside another run's checkpoints
  std::string on_nan = "stop";   // kOnNans
  std::string dist = "none";     // kDists: mpi is one process per host (or device), started by mpirun
  double bucket_mb = 0;
  std::string grad_compression = "none";  // parallel::parse_compression: how gradients travel between processes
  int zero = 0;                           // concise API: 1 shards the optimizer state (parallel/zero_optimizer.h)
  double collective_timeout = 300;  // seconds; dist mpi only
  std::string precision = "fp32";   // ops::kConvPrecisions
  std::string conv_algorithm = "winograd";  // ops::kConvAlgorithms: the CPU's 3x3 stride-1 convolutions
  bool deterministic = false;       // the same bits on any number of devices (chunks of chunk_size)
  int64_t chunk_size = 32;          // deterministic only: the batch must be a multiple of it
  std::string progress = "auto";    // kProgresses: the per-step progress line (see show_progress)
  std::string lr_schedule = "constant";  // optim::kLrSchedules
  int warmup_epochs = 0;                 // linear warmup, per step, over this many epochs
  std::string lr_scaling = "none";       // optim::kLrScalings: linear is lr * batch_size * accumulate / 256
  int accumulate = 1;                    // micro-batches of batch_size per update (gradient accumulation)
  bool sync_bn = false;                  // concise API: BatchNorm statistics over the global batch
  std::string trace_file;                // empty: none; else a Chrome trace and its timeline (trace_file.h)
};

// How the job's devices compute, from its fields (precision, conv_algorithm).
inline ops::ExecutionOptions execution_options(const JobConfig& job) {
  return {ops::parse_conv_precision(job.precision), ops::parse_conv_algorithm(job.conv_algorithm)};
}

// How the job's devices compute and communicate (allreduce, cores, buckets, deterministic
// chunks, sync_bn, loss, execution), parsed from its fields once for both APIs;
// `group`: this process's place in a multi-process job.
parallel::ReplicaGroupOptions engine_options(const JobConfig& job, const parallel::ProcessGroup& group);

// How the job trains (epochs, batch, seed, model, schedule, accumulation, checkpoints,
// resume, on_nan, prefetch), parsed from its fields once for both APIs. The hooks
// (stop_signal, warn, on_resume) are the caller's to attach.
TrainOptions train_options(const JobConfig& job);

// The loss's settings from the job's fields.
inline nn::LossSettings loss_settings(const JobConfig& job) { return {job.loss, job.label_smoothing}; }

// The optimizer's settings from the job's fields.
inline optim::OptimizerSettings optimizer_settings(const JobConfig& job) {
  return {job.lr, job.momentum, job.nesterov, job.weight_decay, job.beta1, job.beta2, job.eps};
}

// The chunk size the replica engine gets: chunk_size in deterministic mode, else 0 (off).
inline int64_t deterministic_chunk(const JobConfig& job) { return job.deterministic ? job.chunk_size : 0; }

// "stop" or "skip"; throws ConfigError (`on_nan`) listing them otherwise.
OnNan parse_on_nan(std::string_view text);

// What can be checked of a job before it joins other processes: every choice, the
// settings only the concise API has, the limits, the devices' text, the bucket size and the
// collective timeout. The rest (epochs, batch size, learning rate, the devices against the
// process group, checkpoints) is validate(ScratchConfig)'s, once the group exists.
void validate(const JobConfig& job);

// A from-scratch (or any) run on devices: its training options, learning rate, the devices
// (kinds, one per process in a job, no more than the batch) and buckets.
void validate(const ScratchConfig& config);

// A run's training options: epochs, batch size, the lr schedule, accumulation and the run
// options.
void validate(const TrainOptions& options);

// Checkpoints and resuming.
void validate(const RunOptions& run);

}  // namespace dpt::train
