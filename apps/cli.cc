// The dptrain command line (cli.h).
//   --api scratch   the lesson's from-scratch loop (LeNet as a parameter list, split_batch,
//                   allreduce, sgd), printing "test acc: A, S sec/epoch on [devices]"
//   --api concise   any model in DataParallel with optim::SGD and train(), printing
//                   "loss L, train acc A, test acc T" and "N examples/sec on [devices]"
#include "cli.h"

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "dpt/checkpoint/checkpoint_dir.h"
#include "dpt/checkpoint/checkpoint_summary.h"
#include "dpt/cuda/runtime.h"
#include "dpt/data/fashion_mnist.h"
#include "dpt/nn/init.h"
#include "dpt/nn/models.h"
#include "dpt/ops/precision.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/mpi_communicator.h"
#include "dpt/parallel/process_group.h"
#include "dpt/train/reporters.h"
#include "dpt/train/stop_request.h"
#include "dpt/train/train_concise.h"
#include "dpt/train/train_from_scratch.h"

namespace {

using namespace dpt;

struct Flags {
  std::string model = "lenet";
  std::string api = "scratch";
  std::string devices = "cpu:1";
  std::string allreduce = "ring";
  std::string data_dir = data::kDefaultDataDir;
  std::string init = "lesson";
  int epochs = 10;
  int64_t batch_size = 256;
  float lr = 0.2f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  uint64_t seed = 0;
  int cores = parallel::available_cores();
  int64_t train_limit = 0;  // 0: the whole split
  int64_t test_limit = 0;
  std::string metrics_file;
  std::string plot_file;
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  int keep_checkpoints = 2;
  bool resume = false;
  std::string on_nan = "stop";
  std::string dist = "none";
  double bucket_mb = 0;
  double collective_timeout = 300;
  std::string precision = "fp32";
};

void add_train_flags(CLI::App& train, Flags& f) {
  train.add_option("--model", f.model, "Network to train")
      ->check(CLI::IsMember({"lenet", "resnet18"}))
      ->capture_default_str();
  train
      .add_option("--api", f.api,
                  "scratch: the lesson's from-scratch loop (LeNet only); concise: Module + DataParallel + "
                  "optim::SGD + train()")
      ->check(CLI::IsMember({"scratch", "concise"}))
      ->capture_default_str();
  train
      .add_option("--devices", f.devices,
                  "Devices, one model replica each: cpu:N (N CPU devices sharing the cores), "
                  "cuda:0,cuda:1 (GPUs by index), or a count such as 2")
      ->capture_default_str();
  train.add_option("--epochs", f.epochs, "Passes over the training set")->capture_default_str();
  train.add_option("--batch-size", f.batch_size, "Global minibatch, split across the devices")->capture_default_str();
  train.add_option("--lr", f.lr, "SGD learning rate")->capture_default_str();
  train.add_option("--momentum", f.momentum, "SGD momentum (--api concise)")->capture_default_str();
  train.add_option("--weight-decay", f.weight_decay, "L2 weight decay (--api concise)")->capture_default_str();
  train.add_option("--init", f.init, "Weight init (--api concise): lesson = N(0, 0.01^2), kaiming, xavier")
      ->check(CLI::IsMember({"lesson", "kaiming", "xavier"}))
      ->capture_default_str();
  train.add_option("--seed", f.seed, "Seed for parameter init and shuffling")->capture_default_str();
  train.add_option("--data", f.data_dir, "Fashion-MNIST directory (IDX files, gzipped or plain)")
      ->capture_default_str();
  train.add_option("--train-limit", f.train_limit, "Train on the first N training images only (0: all)")
      ->capture_default_str();
  train.add_option("--test-limit", f.test_limit, "Evaluate on the first N test images only (0: all)")
      ->capture_default_str();
  train.add_option("--allreduce", f.allreduce, "Gradient allreduce algorithm between devices")
      ->check(CLI::IsMember({"naive", "ring"}))
      ->capture_default_str();
  train.add_option("--cores", f.cores, "CPU cores to split between the CPU devices")->capture_default_str();
  train.add_option("--metrics", f.metrics_file, "Write one JSON line per epoch to this file");
  train.add_option("--plot", f.plot_file, "Draw train loss, train acc and test acc per epoch into this SVG file");
  train.add_option("--checkpoint-dir", f.checkpoint_dir,
                   "Write a checkpoint (parameters, optimizer, data position) here after every epoch; "
                   "SIGINT/SIGTERM also write one before exiting");
  train
      .add_option("--checkpoint-every", f.checkpoint_every, "Also write a checkpoint every N steps (0: per epoch only)")
      ->capture_default_str();
  train.add_option("--keep-checkpoints", f.keep_checkpoints, "How many of the newest checkpoints to keep")
      ->capture_default_str();
  train.add_flag("--resume", f.resume,
                 "Continue from the newest intact checkpoint in --checkpoint-dir (same settings: the result is "
                 "bit for bit that of an uninterrupted run on the same devices)");
  train
      .add_option("--on-nan", f.on_nan, "A NaN/Inf loss or gradient: stop with the step and layer, or skip the update")
      ->check(CLI::IsMember({"stop", "skip"}))
      ->capture_default_str();
  train
      .add_option("--dist", f.dist,
                  "none: the devices are threads of this process; mpi: one process per device, started by "
                  "mpirun -np N (each with --devices cpu:1), rank 0 alone printing and writing files")
      ->check(CLI::IsMember({"none", "mpi"}))
      ->capture_default_str();
  train
      .add_option("--bucket-mb", f.bucket_mb,
                  "Allreduce the gradients in buckets of this many MiB, each as soon as backward has produced it "
                  "(overlapping communication with backward); 0: one allreduce after backward")
      ->capture_default_str();
  train
      .add_option("--precision", f.precision,
                  "Convolution arithmetic: fp32, or bf16 (operands rounded to bfloat16, fp32 accumulation and "
                  "outputs; needs a CPU with avx512_bf16; single-channel convolutions stay fp32). Resume with the "
                  "precision the run started with.")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  train
      .add_option("--collective-timeout", f.collective_timeout,
                  "--dist mpi: seconds a collective waits for the other processes before the whole job is stopped")
      ->capture_default_str();
}

// Throws with the flag's name for combinations that cannot work.
void check_flags(const Flags& f) {
  if (f.api == "scratch") {
    if (f.model != "lenet") {
      throw std::invalid_argument("--model " + f.model + " needs --api concise (the from-scratch loop is LeNet's)");
    }
    if (f.momentum != 0.0f || f.weight_decay != 0.0f || f.init != "lesson") {
      throw std::invalid_argument(
          "--momentum, --weight-decay and --init need --api concise (the lesson's sgd has none)");
    }
  }
  if (f.train_limit < 0 || f.test_limit < 0) throw std::invalid_argument("--train-limit and --test-limit must be >= 0");
}

data::Dataset load_split(const Flags& f, data::Split split, int64_t limit) {
  data::Dataset all = data::load_fashion_mnist(f.data_dir, split);
  return limit > 0 ? data::take_first(all, limit) : all;
}

// Per-step progress on a terminal, per-epoch lines, metrics and plot: everything the
// user sees, shared by both APIs.
class Reporting {
 public:
  Reporting(const Flags& f, std::vector<std::string> device_names)
      : flags_(f), terminal_(train::ProgressBar::is_terminal(stdout)), device_names_(std::move(device_names)) {
    // A resumed run adds its epochs to the metrics of the run it continues.
    if (!f.metrics_file.empty()) metrics_.emplace(f.metrics_file, /*append=*/f.resume);
  }

  void on_resume(const train::ResumeInfo& info) {
    std::string written_on;
    for (const std::string& d : info.written_on) written_on += (written_on.empty() ? "" : ", ") + d;
    std::printf("resuming from %s: epoch %lld, batch %lld (%lld steps taken, written on [%s])\n", info.file.c_str(),
                static_cast<long long>(info.position.epoch + 1), static_cast<long long>(info.position.batch_offset),
                static_cast<long long>(info.position.global_step), written_on.c_str());
    std::fflush(stdout);
    history_ = info.history;  // the plot shows the whole run
  }

  void warn(const std::string& message) {
    if (bar_) {
      bar_->finish();
      bar_.reset();
    }
    std::fprintf(stderr, "dptrain: warning: %s\n", message.c_str());
  }

  void on_step(int epoch, int64_t step, int64_t steps, double loss, double acc) {
    if (!terminal_) return;
    if (!bar_ || step == 1) bar_.emplace(stdout, true, epoch, flags_.epochs, steps);
    bar_->update(step, loss, acc);
  }

  void on_epoch(const train::EpochStats& s) {
    if (bar_) {
      bar_->finish();
      bar_.reset();
    }
    std::printf("epoch %d/%d: loss %.3f, train acc %.3f, test acc %.3f, %.1f sec, %.0f examples/sec, eval %.2f sec\n",
                s.epoch, flags_.epochs, s.train_loss, s.train_acc, s.test_acc, s.seconds, s.examples_per_sec,
                s.eval_seconds);
    std::fflush(stdout);
    history_.push_back(s);
    if (metrics_) metrics_->write(s, device_names_);
    if (!flags_.plot_file.empty()) {
      train::write_svg_plot(
          flags_.plot_file, history_,
          flags_.model + " (" + flags_.api + ") on " + std::to_string(device_names_.size()) + " device(s)");
    }
  }

  train::StepCallback step_callback() {
    return [this](int e, int64_t s, int64_t n, double l, double a) { on_step(e, s, n, l, a); };
  }
  train::EpochCallback epoch_callback() {
    return [this](const train::EpochStats& s) { on_epoch(s); };
  }

  // The reliability options, reporting through this object.
  train::RunOptions run_options() {
    train::RunOptions run;
    run.checkpoint_dir = flags_.checkpoint_dir;
    run.checkpoint_every = flags_.checkpoint_every;
    run.keep_checkpoints = flags_.keep_checkpoints;
    run.resume = flags_.resume;
    run.on_nan = train::parse_on_nan(flags_.on_nan);
    run.stop_signal = train::stop_signal;
    run.warn = [this](const std::string& m) { warn(m); };
    run.on_resume = [this](const train::ResumeInfo& info) { on_resume(info); };
    return run;
  }

 private:
  const Flags& flags_;
  bool terminal_;
  std::vector<std::string> device_names_;
  std::optional<train::ProgressBar> bar_;
  std::optional<train::MetricsWriter> metrics_;
  std::vector<train::EpochStats> history_;
};

// With --dist mpi: MPI for the whole run, and this process's place in the job. Only rank 0
// prints to stdout and writes metrics, plots and checkpoints; the others' stdout is muted.
parallel::ProcessGroup join_job(Flags& f, std::optional<parallel::MpiRuntime>& mpi, const cli::CliHooks& hooks) {
  if (f.dist != "mpi") return {};
  mpi.emplace();  // throws in a build without MPI, saying how to get it
  std::shared_ptr<parallel::Communicator> comm = mpi->communicator(f.allreduce, f.collective_timeout);
  if (hooks.wrap_communicator) comm = hooks.wrap_communicator(std::move(comm));
  parallel::ProcessGroup group{std::move(comm), mpi->rank()};
  if (!group.is_root()) {
    f.metrics_file.clear();
    f.plot_file.clear();
    if (!std::freopen("/dev/null", "w", stdout))
      throw std::runtime_error("cannot mute stdout of rank " + std::to_string(group.rank));
  }
  return group;
}

int run_train(Flags& f, std::optional<parallel::MpiRuntime>& mpi, const cli::CliHooks& hooks) {
  check_flags(f);
  ops::set_conv_precision(ops::parse_conv_precision(f.precision));  // refuses bf16 on a CPU without it
  const std::vector<Device> devices = parallel::parse_device_list(f.devices, cuda::device_count());
  parallel::bucket_bytes_from_mb(f.bucket_mb);  // a bad --bucket-mb fails before MPI starts
  const parallel::ProcessGroup group = join_job(f, mpi, hooks);
  train::ScratchConfig scratch;  // also carries the checks shared by both APIs
  scratch.epochs = f.epochs;
  scratch.batch_size = f.batch_size;
  scratch.lr = f.lr;
  scratch.seed = f.seed;
  scratch.devices = devices;
  scratch.allreduce = f.allreduce;
  scratch.cores = f.cores;
  scratch.bucket_mb = f.bucket_mb;
  scratch.process_group = group;
  Reporting reporting(
      f, parallel::device_names(devices, group));  // opens the metrics file now: a bad path fails before training
  scratch.run = reporting.run_options();
  train::validate(scratch);
  train::validate(scratch.run);

  const data::Dataset train_data = load_split(f, data::Split::train, f.train_limit);
  const data::Dataset test_data = load_split(f, data::Split::test, f.test_limit);
  const int threads = std::max(1, f.cores / static_cast<int>(devices.size()));
  const std::string placement =
      group.distributed() ? std::to_string(group.size()) + " MPI processes with " + device_list_str(devices) + " each"
                          : device_list_str(devices);
  const std::string allreduce = (group.distributed() ? group.comm->name() : f.allreduce) +
                                (f.bucket_mb > 0 ? ", " + std::to_string(f.bucket_mb) + " MiB buckets" : "");
  std::printf(
      "training %s (%s API) on %s (%d thread%s per device, allreduce %s): %lld train / %lld test images "
      "from %s, batch %lld, lr %g, %d epochs%s\n",
      f.model.c_str(), f.api.c_str(), placement.c_str(), threads, threads == 1 ? "" : "s", allreduce.c_str(),
      static_cast<long long>(train_data.size()), static_cast<long long>(test_data.size()), f.data_dir.c_str(),
      static_cast<long long>(f.batch_size), f.lr, f.epochs,
      ops::conv_precision() == ops::ConvPrecision::bf16 ? ", convolutions in bf16 (fp32 accumulation)" : "");
  std::fflush(stdout);
  train::install_stop_handlers();

  if (f.api == "scratch") {
    const train::TrainSummary summary = train::train_lenet_from_scratch(
        train_data, test_data, scratch, reporting.epoch_callback(), reporting.step_callback());
    std::printf("test acc: %.2f, %.1f sec/epoch on %s\n", summary.test_acc, summary.sec_per_epoch, placement.c_str());
    return 0;
  }

  std::unique_ptr<nn::Module> net = f.model == "lenet" ? std::unique_ptr<nn::Module>(nn::lenet_module())
                                                       : std::unique_ptr<nn::Module>(nn::resnet18(10, 1));
  nn::init_weights(*net, nn::parse_init(f.init), f.seed);
  parallel::DataParallel parallel_net(std::move(net), devices,
                                      parallel::DataParallelOptions{f.allreduce, f.cores, f.bucket_mb, group});
  optim::SGD optimizer(parallel_net.replica_parameters(), {f.lr, f.momentum, f.weight_decay});
  const train::TrainHistory history = train::train(parallel_net, optimizer, train_data, test_data,
                                                   {f.epochs, f.batch_size, f.seed, f.model, scratch.run},
                                                   reporting.epoch_callback(), reporting.step_callback());
  const train::EpochStats& last = history.epochs.back();
  std::printf("loss %.3f, train acc %.3f, test acc %.3f\n", last.train_loss, last.train_acc, last.test_acc);
  std::printf("%.1f examples/sec on %s\n", history.examples_per_sec, placement.c_str());
  return 0;
}

int show_checkpoint(const std::string& file) {
  std::printf("%s", checkpoint::summary(checkpoint::load(file)).c_str());
  return 0;
}

}  // namespace

namespace dpt::cli {

int run(int argc, char** argv, const CliHooks& hooks) {
  CLI::App app{"dptrain: data-parallel training of convolutional networks on Fashion-MNIST"};
  app.require_subcommand(1);
  Flags flags;
  CLI::App* train = app.add_subcommand("train", "Train a model and report accuracy and speed");
  add_train_flags(*train, flags);
  std::string checkpoint_file;
  CLI::App* info = app.add_subcommand("checkpoint-info", "Check a checkpoint file and print what it holds");
  info->add_option("file", checkpoint_file, "A step-*.ckpt file from --checkpoint-dir")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::optional<parallel::MpiRuntime> mpi;  // --dist mpi; finalised after everything else
  try {
    return info->parsed() ? show_checkpoint(checkpoint_file) : run_train(flags, mpi, hooks);
  } catch (const train::TrainingInterrupted& e) {
    // Under MPI every rank agreed to stop after the same step; rank 0 speaks for them.
    if (!mpi || mpi->rank() == 0) std::fprintf(stderr, "dptrain: %s\n", e.what());
    return 128 + e.signal();  // the shell's convention for "ended by signal N"
  } catch (const std::exception& e) {
    if (mpi) {
      // One rank's error ends the job on every rank (MPI_Abort), never leaving them waiting.
      std::fprintf(stderr, "dptrain: error: rank %d of %d (%s): %s\n", mpi->rank(), mpi->size(), mpi->host().c_str(),
                   e.what());
      parallel::MpiRuntime::abort_job(1);
    }
    std::fprintf(stderr, "dptrain: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace dpt::cli
