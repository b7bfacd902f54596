#include "dpt/train/config.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "dpt/cuda/runtime.h"
#include "dpt/nn/init.h"
#include "dpt/nn/registry.h"
#include "dpt/ops/precision.h"
#include "dpt/optim/lr_schedule.h"
#include "dpt/optim/sgd.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/gradient_bucketer.h"
#include "dpt/parallel/replica_group.h"

namespace dpt::train {

namespace {

void check_choice(const std::string& field, const std::string& text, std::span<const std::string_view> choices) {
  if (std::find(choices.begin(), choices.end(), text) == choices.end()) throw bad_choice(field, text, choices);
}

void check_epochs(int epochs) {
  if (epochs < 1) throw ConfigError("epochs", "`epochs` must be at least 1, got " + std::to_string(epochs));
}

void check_batch_size(int64_t batch_size) {
  if (batch_size < 1) {
    throw ConfigError("batch_size", "`batch_size` must be positive, got " + std::to_string(batch_size));
  }
}

void check_accumulate(int accumulate) {
  if (accumulate < 1) {
    throw ConfigError("accumulate",
                      "`accumulate` must be at least 1 micro-batch per update, got " + std::to_string(accumulate));
  }
}

}  // namespace

OnNan parse_on_nan(std::string_view text) {
  if (text == "stop") return OnNan::stop;
  if (text == "skip") return OnNan::skip;
  throw bad_choice("on_nan", text, kOnNans);
}

void validate(const JobConfig& job) {
  nn::check_model_name(job.model);
  check_choice("api", job.api, kApis);
  check_choice("allreduce", job.allreduce, kAllreduces);
  check_choice("dist", job.dist, kDists);
  check_choice("progress", job.progress, kProgresses);
  nn::parse_init(job.init);
  parse_on_nan(job.on_nan);
  optim::check_optimizer(job.optimizer, optimizer_settings(job));
  try {
    nn::make_loss(loss_settings(job));
  } catch (const ConfigError&) {
    throw;  // names its field already
  } catch (const std::invalid_argument& e) {
    throw ConfigError(job.label_smoothing != 0.0f && job.loss == "cross-entropy" ? "label_smoothing" : "loss",
                      e.what());
  }
  ops::parse_conv_precision(job.precision);
  ops::parse_conv_algorithm(job.conv_algorithm);
  optim::parse_schedule(job.lr_schedule);
  optim::parse_lr_scaling(job.lr_scaling);
  check_epochs(job.epochs);
  optim::check_schedule({optim::parse_schedule(job.lr_schedule), job.warmup_epochs}, job.epochs);
  check_accumulate(job.accumulate);
  // (More than the process may run on is allowed, and warned about by the job: tests give
  // 3 devices a core each on 2 cores.)
  if (job.cores < 1) throw ConfigError("cores", "`cores` must be at least 1, got " + std::to_string(job.cores));
  if (!job.resume_run.empty() && !job.resume && !job.resume_if_any) {
    throw ConfigError("resume_run", "`resume_run` names the run `resume` continues; pass `resume` with it");
  }
  if (job.zero == 1 && job.api != "concise") {
    throw ConfigError("zero", "`zero` 1 needs `api` concise: the lesson's sgd keeps no state to shard");
  }
  if (job.sync_bn) {
    if (job.api != "concise") {
      throw ConfigError("sync_bn", "`sync_bn` needs `api` concise (the from-scratch LeNet has no BatchNorm)");
    }
  }
  if (job.api == "scratch") {
    if (job.model != "lenet") {
      throw ConfigError("model", "`model` " + job.model + " needs `api` concise (the from-scratch loop is LeNet's)");
    }
    if (job.momentum != 0.0f || job.weight_decay != 0.0f || job.init != "lesson") {
      const std::string field = job.momentum != 0.0f ? "momentum" : job.weight_decay != 0.0f ? "weight_decay" : "init";
      throw ConfigError(field, "`momentum`, `weight_decay` and `init` need `api` concise (the lesson's sgd has none)");
    }
    if (job.optimizer != "sgd" || job.nesterov) {
      throw ConfigError(job.optimizer != "sgd" ? "optimizer" : "nesterov",
                        "`optimizer` " + job.optimizer + (job.nesterov ? " with `nesterov`" : "") +
                            " needs `api` concise (the lesson's loop runs its own sgd)");
    }
  }
  if (job.data.train_limit < 0 || job.data.test_limit < 0) {
    throw ConfigError(job.data.train_limit < 0 ? "train_limit" : "test_limit",
                      "`train_limit` and `test_limit` must be >= 0");
  }
  data::validate(job.data);
  parallel::parse_device_list(job.devices, cuda::device_count());
  parallel::check_bucket_mb(job.bucket_mb);
  parallel::ReplicaGroupOptions modes;
  modes.bucket_mb = job.bucket_mb;
  modes.deterministic_chunk = deterministic_chunk(job);
  modes.sync_bn = job.sync_bn;
  modes.compression = parallel::parse_compression(job.grad_compression);
  modes.zero = job.zero;
  parallel::check_replica_modes(modes);
  if (job.deterministic && job.chunk_size < 1) {
    throw ConfigError("chunk_size", "`chunk_size` must be at least 1, got " + std::to_string(job.chunk_size));
  }
  if (job.dist == "mpi" && !(job.collective_timeout > 0)) {
    throw ConfigError("collective_timeout",
                      "`collective_timeout` must be > 0 seconds, got " + std::to_string(job.collective_timeout));
  }
}

parallel::ReplicaGroupOptions engine_options(const JobConfig& job, const parallel::ProcessGroup& group) {
  parallel::ReplicaGroupOptions engine;
  engine.allreduce = job.allreduce;
  engine.cores = job.cores;
  engine.bucket_mb = job.bucket_mb;
  engine.process_group = group;
  engine.deterministic_chunk = deterministic_chunk(job);
  engine.sync_bn = job.sync_bn;
  engine.compression = parallel::parse_compression(job.grad_compression);
  engine.zero = job.zero;
  engine.loss = nn::make_loss(loss_settings(job));
  engine.execution = execution_options(job);
  return engine;
}

// The job's settings beyond those a checkpoint has fields for that change the result, for
// resuming to compare: the optimizer's parameters that apply to it, the loss, the arithmetic.
std::vector<std::pair<std::string, std::string>> result_settings(const JobConfig& job) {
  const auto number = [](float v) { return setting_text(v); };
  std::vector<std::pair<std::string, std::string>> s;
  if (job.optimizer == "sgd") {
    s.emplace_back("momentum", number(job.momentum));
    s.emplace_back("nesterov", job.nesterov ? "true" : "false");
  } else {
    s.emplace_back("beta1", number(job.beta1));
    s.emplace_back("beta2", number(job.beta2));
    s.emplace_back("eps", number(job.eps));
  }
  s.emplace_back("weight_decay", number(job.weight_decay));
  s.emplace_back("loss", job.loss);
  s.emplace_back("label_smoothing", number(job.label_smoothing));
  s.emplace_back("precision", job.precision);
  s.emplace_back("conv_algorithm", job.conv_algorithm);
  return s;
}

TrainOptions train_options(const JobConfig& job) {
  TrainOptions options;
  options.epochs = job.epochs;
  options.batch_size = job.batch_size;
  options.seed = job.seed;
  options.model = job.model;
  options.schedule = {optim::parse_schedule(job.lr_schedule), job.warmup_epochs};
  options.lr_scaling = optim::parse_lr_scaling(job.lr_scaling);
  options.accumulate = job.accumulate;
  RunOptions& run = options.run;
  run.checkpoint_dir = job.checkpoint_dir;
  run.checkpoint_every = job.checkpoint_every;
  run.keep_checkpoints = job.keep_checkpoints;
  run.resume = job.resume || job.resume_if_any;
  run.start_if_none = job.resume_if_any && !job.resume;
  run.resume_run = job.resume_run;
  run.share_checkpoint_dir = job.share_checkpoint_dir;
  options.recorded_settings = result_settings(job);
  run.on_nan = parse_on_nan(job.on_nan);
  run.prefetch = job.prefetch;
  return options;
}

void validate(const ScratchConfig& config) {
  validate(config.training);
  optim::check_learning_rate(config.lr);
  parallel::check_bucket_mb(config.engine.bucket_mb);
  if (config.engine.sync_bn) throw ConfigError("sync_bn", "`sync_bn` needs `api` concise (the from-scratch LeNet has no BatchNorm)");
  parallel::check_replica_devices(config.devices, config.engine);
  const int64_t batch_size = config.training.batch_size;
  parallel::check_batch_covers_devices(batch_size, config.devices, config.engine.process_group);
  if (const int64_t chunk = config.engine.deterministic_chunk; chunk > 0 && batch_size % chunk != 0) {
    throw ConfigError("batch_size", "`deterministic` cuts every batch into chunks of `chunk_size` " +
                                        std::to_string(chunk) + ": `batch_size` " + std::to_string(batch_size) +
                                        " is not a multiple of it");
  }
}

void validate(const TrainOptions& options) {
  check_epochs(options.epochs);
  check_batch_size(options.batch_size);
  optim::check_schedule(options.schedule, options.epochs);
  check_accumulate(options.accumulate);
  validate(options.run);
}

void validate(const RunOptions& run) {
  if (run.checkpoint_every < 0) {
    throw ConfigError("checkpoint_every",
                      "`checkpoint_every` must be >= 0, got " + std::to_string(run.checkpoint_every));
  }
  if (run.keep_checkpoints < 1) {
    throw ConfigError("keep_checkpoints",
                      "`keep_checkpoints` must be at least 1, got " + std::to_string(run.keep_checkpoints));
  }
  if (run.checkpoint_dir.empty() && (run.resume || run.checkpoint_every > 0)) {
    const std::string field = run.resume ? "resume" : "checkpoint_every";
    throw ConfigError(field, "`" + field + "` needs `checkpoint_dir`");
  }
  if (run.prefetch < 0) {
    throw ConfigError("prefetch", "`prefetch` must be >= 0 batches (0: none), got " + std::to_string(run.prefetch));
  }
}

}  // namespace dpt::train
