#include "dpt/report/job.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "dpt/checkpoint/checkpoint_dir.h"
#include "dpt/checkpoint/checkpoint_summary.h"
#include "dpt/checkpoint/group_checkpoints.h"
#include "dpt/checkpoint/run_folder.h"
#include "dpt/cuda/runtime.h"
#include "dpt/data/source.h"
#include "dpt/nn/init.h"
#include "dpt/nn/models.h"
#include "dpt/nn/registry.h"
#include "dpt/ops/precision.h"
#include "dpt/optim/lr_schedule.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/mpi_communicator.h"
#include "dpt/parallel/process_group.h"
#include "dpt/parallel/zero_optimizer.h"
#include "dpt/report/console_reporter.h"
#include "dpt/train/stop_request.h"
#include "dpt/report/svg.h"
#include "dpt/report/trace_file.h"
#include "dpt/train/train_concise.h"
#include "dpt/train/train_from_scratch.h"

namespace dpt::report {

// The job drives the library's training entry points and their configuration.
using namespace dpt::train;

namespace {

std::string worded(const JobHooks& hooks, const std::string& message) {
  return hooks.wording ? hooks.wording(message) : message;
}

// With dist mpi: MPI for the whole run, and this process's place in the job. Only rank 0
// prints to stdout and writes metrics, plots and checkpoints; the others' stdout is muted.
parallel::ProcessGroup join_job(JobConfig& job, std::optional<parallel::MpiRuntime>& mpi, const JobHooks& hooks) {
  if (job.dist != "mpi") return {};
  mpi.emplace();  // throws in a build without MPI, saying how to get it
  std::shared_ptr<parallel::Communicator> comm = mpi->communicator(job.allreduce, job.collective_timeout);
  if (hooks.wrap_communicator) comm = hooks.wrap_communicator(std::move(comm));
  parallel::ProcessGroup group{std::move(comm), mpi->rank()};
  if (!group.is_root()) {
    job.metrics_file.clear();
    job.plot_file.clear();
    if (!std::freopen("/dev/null", "w", stdout))
      throw std::runtime_error("cannot mute stdout of rank " + std::to_string(group.rank));
  }
  return group;
}

// Both splits; the held-out split follows the seed, and warnings go where the job's go.
data::LoadedData load_job_data(const JobConfig& job, const JobHooks& hooks) {
  data::DataOptions options = job.data;
  options.seed = job.seed;
  options.warn = [&hooks](const std::string& message) {
    std::fprintf(stderr, "dptrain: warning: %s\n", worded(hooks, message).c_str());
  };
  return data::load_data(options);
}

// The model the job trains, sized from its data.
std::unique_ptr<nn::Module> build_model(const JobConfig& job, const data::Dataset& data) {
  return nn::build_model(job.model, data.shape(), data.num_classes());
}

// --trace: the files are tried before training (a bad path fails at once), and the
// processes of a job start their clocks after a barrier, so that their spans line up.
void start_job_trace(const JobConfig& job, const parallel::ProcessGroup& group) {
  if (job.trace_file.empty()) return;
  if (group.is_root()) {
    write_text_file(job.trace_file, "", "trace");
    write_text_file(timeline_file(job.trace_file), "", "trace timeline");
  }
  if (group.distributed()) group.comm->barrier(group.rank);
  start_trace();
}

void finish_job_trace(const JobConfig& job, const parallel::ProcessGroup& group) {
  if (job.trace_file.empty()) return;
  const std::string summary = write_trace(job.trace_file, group);
  if (!summary.empty()) std::printf("%s\n", summary.c_str());
}

int train_job(JobConfig& job, const std::vector<Device>& devices, const parallel::ProcessGroup& group,
              const JobHooks& hooks) {
  ScratchConfig scratch;  // also what the concise API is checked against
  scratch.training = train_options(job);  // the concise API's too
  scratch.training.run.stop_signal = stop_signal;
  scratch.training.run.check_replicas = hooks.check_replicas;
  scratch.lr = job.lr;
  scratch.devices = devices;
  scratch.engine = engine_options(job, group);  // the concise API's DataParallelOptions too
  ConsoleReporter reporter(  // opens the metrics file now: a bad path fails before training
      {job.epochs, job.metrics_file, job.resume, job.plot_file,
       job.model + " (" + job.api + ") on " + std::to_string(parallel::device_names(devices, group).size()) +
           " device(s)",
       hooks.wording, job.progress},
      parallel::device_names(devices, group));
  reporter.attach(scratch.training.run);
  validate(scratch);
  if (job.cores > parallel::available_cores()) {
    // Threads past the cores wait on each other: 1000 on 2 cores made an epoch 160x slower.
    std::fprintf(stderr, "dptrain: warning: %s\n",
                 worded(hooks, "`cores` " + std::to_string(job.cores) + " is more than the " +
                                   std::to_string(parallel::available_cores()) +
                                   " cores this process may run on; their threads will wait on each other")
                     .c_str());
  }
  // Output folders are tried before the data loads, so that a bad one costs no work.
  if (!job.checkpoint_dir.empty()) checkpoint::check_folder(checkpoint::expand_host(job.checkpoint_dir));

  const data::LoadedData loaded = load_job_data(job, hooks);
  const data::Dataset& train_data = *loaded.train;
  const data::Dataset& test_data = *loaded.test;
  const data::DataInfo info = train_data.info();
  // Deterministic mode computes every chunk on one thread (ReplicaGroup).
  const int threads = job.deterministic ? 1 : std::max(1, job.cores / static_cast<int>(devices.size()));
  const std::string placement =
      group.distributed() ? std::to_string(group.size()) + " MPI processes with " + device_list_str(devices) + " each"
                          : device_list_str(devices);
  const std::string allreduce =
      (devices.size() > 1 && group.distributed() ? group.comm->name() + " between processes, " + job.allreduce +
                                                       " within each"
       : group.distributed()                      ? group.comm->name()
                                                  : job.allreduce) +
      (job.bucket_mb > 0 ? ", " + std::to_string(job.bucket_mb) + " MiB buckets" : "") +
      (job.grad_compression != "none" ? ", gradients in " + job.grad_compression + " between processes" : "") +
      (job.zero == 1 ? ", optimizer state sharded (zero 1)" : "");
  std::printf(
      "training %s (%s API) on %s (%d thread%s per device, allreduce %s): %lld train / %lld test images "
      "from %s, batch %lld, lr %g, %d epochs%s%s\n",
      job.model.c_str(), job.api.c_str(), placement.c_str(), threads, threads == 1 ? "" : "s", allreduce.c_str(),
      static_cast<long long>(train_data.size()), static_cast<long long>(test_data.size()), job.data.data_dir.c_str(),
      static_cast<long long>(job.batch_size), job.lr, job.epochs,
      scratch.engine.execution->precision == ops::ConvPrecision::bf16 ? ", convolutions in bf16 (fp32 accumulation)" : "",
      scratch.engine.execution->conv_algorithm == ops::ConvAlgorithm::direct ? ", convolutions direct (no Winograd)" : "");
  std::printf("data: %s, %s images (channels x height x width) in %lld classes%s\n", loaded.format.c_str(),
              info.shape.str().c_str(), static_cast<long long>(info.classes.size()),
              info.mean.empty() ? "" : ", normalized per channel");
  if (job.lr_schedule != "constant" || job.warmup_epochs > 0 || job.lr_scaling != "none" || job.accumulate > 1 ||
      job.sync_bn) {
    const float base = optim::scaled_lr(job.lr, scratch.training.lr_scaling, job.batch_size * job.accumulate);
    std::printf("lr schedule %s from lr %g%s, %d warmup epoch%s; %d micro-batch%s of %lld per update%s\n",
                job.lr_schedule.c_str(), base, job.lr_scaling == "linear" ? " (linear scaling)" : "", job.warmup_epochs,
                job.warmup_epochs == 1 ? "" : "s", job.accumulate, job.accumulate == 1 ? "" : "es",
                static_cast<long long>(job.batch_size), job.sync_bn ? "; BatchNorm synchronized over the devices" : "");
  }
  if (job.loss != "cross-entropy" || job.label_smoothing > 0.0f) std::printf("loss: %s\n", scratch.engine.loss->name().c_str());
  if (job.deterministic) {
    std::printf("deterministic: chunks of %lld examples, one thread each, summed in a fixed tree: the same bits on "
                "any number of devices\n",
                static_cast<long long>(job.chunk_size));
  }
  std::fflush(stdout);
  install_stop_handlers();

  if (job.api == "scratch") {
    const TrainSummary summary =
        train_lenet_from_scratch(train_data, test_data, scratch, reporter.epoch_callback(), reporter.step_callback());
    std::printf("test acc: %.2f, %.1f sec/epoch on %s\n", summary.test_acc, summary.sec_per_epoch, placement.c_str());
    return 0;
  }

  std::unique_ptr<nn::Module> net = build_model(job, train_data);
  nn::init_weights(*net, nn::parse_init(job.init), job.seed);
  parallel::DataParallel parallel_net(std::move(net), devices, scratch.engine);
  const std::unique_ptr<optim::Optimizer> optimizer =
      parallel::make_replica_optimizer(parallel_net.group(), job.optimizer, optimizer_settings(job));
  const TrainHistory history =
      train::train(parallel_net, *optimizer, train_data, test_data, scratch.training, reporter.epoch_callback(),
                   reporter.step_callback());
  const EpochStats& last = history.epochs.back();
  std::printf("loss %.3f, train acc %.3f, test acc %.3f\n", last.train_loss, last.train_acc, last.test_acc);
  if (const auto* zero = dynamic_cast<const parallel::ZeroOptimizer*>(optimizer.get())) {
    std::printf("zero 1: optimizer state %.3f MB in this process, %.3f MB unsharded\n",
                static_cast<double>(zero->state_bytes()) / 1e6, static_cast<double>(zero->unsharded_state_bytes()) / 1e6);
  }
  std::printf("%.1f examples/sec on %s\n", history.examples_per_sec, placement.c_str());
  return 0;
}

// train_job with --trace around it: the trace is also written when a signal stops the run
// (every process stops after the same step), not after an error.
int traced_train_job(JobConfig& job, std::optional<parallel::MpiRuntime>& mpi, const JobHooks& hooks) {
  validate(job);  // everything that can fail before MPI starts
  ops::check_execution(execution_options(job));  // refuses bf16 on a CPU without it
  const std::vector<Device> devices = parallel::parse_device_list(job.devices, cuda::device_count());
  const parallel::ProcessGroup group = join_job(job, mpi, hooks);
  start_job_trace(job, group);
  try {
    const int status = train_job(job, devices, group, hooks);
    finish_job_trace(job, group);
    return status;
  } catch (const TrainingInterrupted&) {
    finish_job_trace(job, group);
    throw;
  }
}

// Runs `body`, turning what it throws into the job's exit status and message.
template <typename Body>
int reporting_errors(const JobHooks& hooks, Body body) {
  std::optional<parallel::MpiRuntime> mpi;  // dist mpi; finalised after everything else
  try {
    return body(mpi);
  } catch (const TrainingInterrupted& e) {
    // Under MPI every rank agreed to stop after the same step; rank 0 speaks for them.
    if (!mpi || mpi->rank() == 0) std::fprintf(stderr, "dptrain: %s\n", worded(hooks, e.what()).c_str());
    return 128 + e.signal();  // the shell's convention for "ended by signal N"
  } catch (const std::exception& e) {
    const std::string message = worded(hooks, e.what());
    if (mpi) {
      // One rank's error ends the job on every rank (MPI_Abort), never leaving them waiting.
      std::fprintf(stderr, "dptrain: error: rank %d of %d (%s): %s\n", mpi->rank(), mpi->size(), mpi->host().c_str(),
                   message.c_str());
      parallel::MpiRuntime::abort_job(1);
    }
    std::fprintf(stderr, "dptrain: error: %s\n", message.c_str());
    return 1;
  }
}

}  // namespace

int run_job(JobConfig job, const JobHooks& hooks) {
  return reporting_errors(hooks, [&](std::optional<parallel::MpiRuntime>& mpi) { return traced_train_job(job, mpi, hooks); });
}

int show_checkpoint(const std::string& file, const JobHooks& hooks) {
  return reporting_errors(hooks, [&](std::optional<parallel::MpiRuntime>&) {
    std::printf("%s", checkpoint::summary(checkpoint::load(file)).c_str());
    return 0;
  });
}

}  // namespace dpt::report
