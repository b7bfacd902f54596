// The dptrain command line (cli.h): parsing argv into a train::JobConfig, and mapping
// between the library's config field names and the flags. Checking and running the job is
// the library's (train/config.h, train/job.h).
#include "cli.h"

#include <CLI/CLI.hpp>
#include <array>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "dpt/data/source.h"
#include "dpt/nn/init.h"
#include "dpt/nn/loss.h"
#include "dpt/nn/registry.h"
#include "dpt/ops/precision.h"
#include "dpt/optim/lr_schedule.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/communicator.h"
#include "dpt/report/job.h"
#include "dpt/version.h"
#include "launch/launcher.h"

namespace dpt::cli {

namespace {

// The one table of the CLI's names for config fields (train::JobConfig, and the settings
// of evaluate, predict and export in commands.h): every flag is declared with it, and every backquoted field in a message the library
// prints is rewritten with it.
struct FieldFlag {
  std::string_view field, flag;
};
constexpr std::array kFieldFlags{
    FieldFlag{"model", "--model"},
    FieldFlag{"api", "--api"},
    FieldFlag{"devices", "--devices"},
    FieldFlag{"epochs", "--epochs"},
    FieldFlag{"batch_size", "--batch-size"},
    FieldFlag{"lr", "--lr"},
    FieldFlag{"optimizer", "--optimizer"},
    FieldFlag{"momentum", "--momentum"},
    FieldFlag{"nesterov", "--nesterov"},
    FieldFlag{"beta1", "--beta1"},
    FieldFlag{"beta2", "--beta2"},
    FieldFlag{"eps", "--eps"},
    FieldFlag{"weight_decay", "--weight-decay"},
    FieldFlag{"loss", "--loss"},
    FieldFlag{"label_smoothing", "--label-smoothing"},
    FieldFlag{"init", "--init"},
    FieldFlag{"seed", "--seed"},
    FieldFlag{"data_dir", "--data"},
    FieldFlag{"data_format", "--data-format"},
    FieldFlag{"image_size", "--image-size"},
    FieldFlag{"channels", "--channels"},
    FieldFlag{"test_split", "--test-split"},
    FieldFlag{"cifar_labels", "--cifar-labels"},
    FieldFlag{"on_bad_image", "--on-bad-image"},
    FieldFlag{"data_cache", "--data-cache"},
    FieldFlag{"max_image_pixels", "--max-image-pixels"},
    FieldFlag{"prefetch", "--prefetch"},
    FieldFlag{"random_crop", "--random-crop"},
    FieldFlag{"hflip", "--hflip"},
    FieldFlag{"normalize", "--normalize"},
    FieldFlag{"train_limit", "--train-limit"},
    FieldFlag{"test_limit", "--test-limit"},
    FieldFlag{"allreduce", "--allreduce"},
    FieldFlag{"cores", "--cores"},
    FieldFlag{"metrics_file", "--metrics"},
    FieldFlag{"plot_file", "--plot"},
    FieldFlag{"checkpoint_dir", "--checkpoint-dir"},
    FieldFlag{"checkpoint_every", "--checkpoint-every"},
    FieldFlag{"keep_checkpoints", "--keep-checkpoints"},
    FieldFlag{"resume", "--resume"},
    FieldFlag{"resume_if_any", "--resume-if-any"},
    FieldFlag{"resume_run", "--resume-run"},
    FieldFlag{"share_checkpoint_dir", "--share-checkpoint-dir"},
    FieldFlag{"on_nan", "--on-nan"},
    FieldFlag{"dist", "--dist"},
    FieldFlag{"bucket_mb", "--bucket-mb"},
    FieldFlag{"grad_compression", "--grad-compression"},
    FieldFlag{"zero", "--zero"},
    FieldFlag{"deterministic", "--deterministic"},
    FieldFlag{"chunk_size", "--chunk-size"},
    FieldFlag{"precision", "--precision"},
    FieldFlag{"conv_algorithm", "--conv-algorithm"},
    FieldFlag{"collective_timeout", "--collective-timeout"},
    FieldFlag{"lr_schedule", "--lr-schedule"},
    FieldFlag{"warmup_epochs", "--warmup-epochs"},
    FieldFlag{"lr_scaling", "--lr-scaling"},
    FieldFlag{"accumulate", "--accumulate"},
    FieldFlag{"sync_bn", "--sync-bn"},
    FieldFlag{"progress", "--progress"},
    FieldFlag{"trace_file", "--trace"},
    // evaluate, predict, export
    FieldFlag{"checkpoint", "--checkpoint"},
    FieldFlag{"confusion_svg", "--confusion-svg"},
    FieldFlag{"top_k", "--top-k"},
    FieldFlag{"json", "--json"},
    FieldFlag{"onnx_file", "--onnx"},
};

std::string flag(std::string_view field) {
  for (const FieldFlag& f : kFieldFlags) {
    if (f.field == field) return std::string(f.flag);
  }
  throw std::logic_error("dptrain has no flag for the config field " + std::string(field));
}

// `message` with every backquoted config field ("`batch_size`") replaced by its flag
// ("--batch-size"); backquoted text that is no field stays as it is.
std::string with_flags(const std::string& message) {
  std::string out;
  size_t at = 0;
  while (at < message.size()) {
    const size_t open = message.find('`', at);
    const size_t close = open == std::string::npos ? std::string::npos : message.find('`', open + 1);
    if (close == std::string::npos) break;
    out.append(message, at, open - at);
    const std::string_view name(message.data() + open + 1, close - open - 1);
    const FieldFlag* found = nullptr;
    for (const FieldFlag& f : kFieldFlags) found = f.field == name ? &f : found;
    if (found) {
      out += found->flag;
    } else {
      out.append(message, open, close - open + 1);
    }
    at = close + 1;
  }
  return out + message.substr(std::min(at, message.size()));
}

// "Network to train (lenet or resnet18)": a help text with the library's choices.
std::string listing(const std::string& help, std::span<const std::string_view> choices) {
  return help + " (" + choices_str(choices) + ")";
}

void add_max_image_pixels_flag(CLI::App& cmd, int64_t& max_pixels) {
  cmd.add_option(flag("max_image_pixels"), max_pixels,
                 "The most pixels (width x height) a picture may declare; a larger one is refused from its header "
                 "before decoding (a decompression bomb: a few hundred bytes can declare 60000 x 60000). Pillow's "
                 "limit by default")
      ->capture_default_str();
}

// Where the data comes from and how it is read: train and evaluate share these.
void add_data_flags(CLI::App& cmd, data::DataOptions& d) {
  cmd.add_option(flag("data_dir"), d.data_dir,
                 "The data: a folder of IDX files (the MNIST family), CIFAR-10/100 binary batches, an image folder "
                 "(train/CLASS/PICTURE, test/...), NumPy arrays (x_train.npy ...), or an .npz file")
      ->capture_default_str();
  cmd.add_option(flag("data_format"), d.data_format,
                 listing("The format of --data; auto tells it from what the path holds", data::kDataFormats))
      ->capture_default_str();
  cmd.add_option(flag("image_size"), d.image_size,
                 "Resize every image to N x N (0: as stored; an image folder then takes its first picture's size)")
      ->capture_default_str();
  cmd.add_option(flag("channels"), d.channels, "1 (grey) or 3 (colour); 0: as the data is")->capture_default_str();
  cmd.add_option(flag("test_split"), d.test_split,
                 "Hold out this fraction of the training data (seeded by --seed) as the test split, for data "
                 "with none (an image folder without test/, NumPy arrays without x_test)")
      ->capture_default_str();
  cmd.add_option(flag("cifar_labels"), d.cifar_labels, listing("CIFAR-100's label set", data::kCifarLabels))
      ->capture_default_str();
  cmd.add_option(flag("on_bad_image"), d.on_bad_image,
                 listing("A picture of an image folder that does not decode: stop naming it, or skip it (one warning "
                         "with the count)",
                         data::kOnBadImages))
      ->capture_default_str();
  add_max_image_pixels_flag(cmd, d.max_image_pixels);
  cmd.add_option(flag("data_cache"), d.data_cache,
                 "MiB of an image folder's decoded pictures kept in memory, per process; pictures past it are "
                 "decoded for every batch (0: all of them)")
      ->capture_default_str();
}

void add_train_flags(CLI::App& train, train::JobConfig& j) {
  const std::vector<std::string> models = nn::model_names();  // the registry's: lenet, resnet18
  train.add_option(flag("model"), j.model, listing("Network to train", std::vector<std::string_view>(models.begin(), models.end())))
      ->capture_default_str();
  train
      .add_option(flag("api"), j.api,
                  listing("scratch: the lesson's from-scratch loop (LeNet only); concise: Module + DataParallel + "
                          "optim::SGD + train()",
                          train::kApis))
      ->capture_default_str();
  train
      .add_option(flag("devices"), j.devices,
                  "Devices, one model replica each: cpu:N (N CPU devices sharing the cores), "
                  "cuda:0,cuda:1 (GPUs by index), or a count such as 2")
      ->capture_default_str();
  train.add_option(flag("epochs"), j.epochs, "Passes over the training set")->capture_default_str();
  train.add_option(flag("batch_size"), j.batch_size, "Global minibatch, split across the devices")
      ->capture_default_str();
  train.add_option(flag("lr"), j.lr, "SGD learning rate")->capture_default_str();
  train
      .add_option(flag("lr_schedule"), j.lr_schedule,
                  listing("Learning rate per step: constant (the lesson's); step: x0.1 from half the epochs, x0.01 "
                          "from three quarters; cosine: from --lr down to 0 along a half cosine. A function of the "
                          "step, so --resume continues it exactly",
                          optim::kLrSchedules))
      ->capture_default_str();
  train
      .add_option(flag("warmup_epochs"), j.warmup_epochs,
                  "Raise the lr linearly, step by step, from lr/steps to --lr over the first N epochs; the "
                  "schedule runs over the epochs after them (fewer than --epochs)")
      ->capture_default_str();
  train
      .add_option(flag("lr_scaling"), j.lr_scaling,
                  listing("none: --lr as given; linear: --lr x (examples per update = --batch-size x --accumulate) "
                          "/ 256 (Goyal et al. 2017)",
                          optim::kLrScalings))
      ->capture_default_str();
  train
      .add_option(flag("accumulate"), j.accumulate,
                  "Gradient accumulation: N micro-batches of --batch-size per update, the same update as one "
                  "step on a batch N times larger (a step, as --checkpoint-every counts, is one update)")
      ->capture_default_str();
  train.add_flag(flag("sync_bn"), j.sync_bn,
                 "--api concise: BatchNorm normalizes with the statistics of the whole global batch (summed over "
                 "the devices every step, forward and backward), as one device holding the batch would; without "
                 "it each device uses its own shard's");
  train
      .add_option(flag("optimizer"), j.optimizer,
                  listing("sgd (the lesson's, with --momentum and --nesterov), adam, or adamw (decoupled weight "
                          "decay); adam and adamw need --api concise and a smaller --lr, such as 0.001",
                          optim::kOptimizers))
      ->capture_default_str();
  train.add_option(flag("momentum"), j.momentum, "SGD momentum (--api concise)")->capture_default_str();
  train.add_flag(flag("nesterov"), j.nesterov, "SGD with Nesterov momentum (--api concise, --momentum > 0)");
  train.add_option(flag("weight_decay"), j.weight_decay,
                   "Weight decay: L2 for sgd and adam, decoupled for adamw (--api concise)")
      ->capture_default_str();
  train
      .add_option(flag("loss"), j.loss,
                  listing("The loss each device sums over its shard: softmax cross-entropy, or mean squared error "
                          "against the labels' one-hot codes",
                          nn::kLosses))
      ->capture_default_str();
  train
      .add_option(flag("label_smoothing"), j.label_smoothing,
                  "Cross-entropy against (1 - s) one-hot + s / classes, s in [0, 1) (0: off; 0.1 is usual)")
      ->capture_default_str();
  train.add_option(flag("beta1"), j.beta1, "Adam's decay of the gradient's mean (adam, adamw)")->capture_default_str();
  train.add_option(flag("beta2"), j.beta2, "Adam's decay of the gradient's square (adam, adamw)")->capture_default_str();
  train.add_option(flag("eps"), j.eps, "Adam's term added to the denominator (adam, adamw)")->capture_default_str();
  train
      .add_option(flag("init"), j.init,
                  listing("Weight init (--api concise): lesson = N(0, 0.01^2), kaiming, xavier", nn::kInits))
      ->capture_default_str();
  train.add_option(flag("seed"), j.seed, "Seed for parameter init and shuffling")->capture_default_str();
  add_data_flags(train, j.data);
  train.add_option(flag("train_limit"), j.data.train_limit, "Train on the first N training images only (0: all)")
      ->capture_default_str();
  train.add_option(flag("test_limit"), j.data.test_limit, "Evaluate on the first N test images only (0: all)")
      ->capture_default_str();
  train.add_option(flag("random_crop"), j.data.random_crop,
                   "Augment: pad every training image by N zero pixels and crop a random window of its size (0: off)")
      ->capture_default_str();
  train.add_flag(flag("hflip"), j.data.hflip, "Augment: mirror every training image left to right with probability 1/2");
  train.add_flag(flag("normalize"), j.data.normalize,
                 "Normalize every channel by the training split's mean and standard deviation (recorded in "
                 "checkpoints, so evaluate, predict and export apply the same)");
  train
      .add_option(flag("allreduce"), j.allreduce,
                  listing("Gradient allreduce algorithm between devices", train::kAllreduces))
      ->capture_default_str();
  train.add_option(flag("cores"), j.cores, "CPU cores to split between the CPU devices")->capture_default_str();
  train.add_option(flag("prefetch"), j.prefetch,
                 "Training batches decoded and augmented ahead of the step, on a thread of their own (0: none)")
      ->capture_default_str();
  train.add_option(flag("metrics_file"), j.metrics_file, "Write one JSON line per epoch to this file");
  train.add_option(flag("plot_file"), j.plot_file,
                   "Draw train loss, train acc and test acc per epoch into this SVG file");
  train.add_option(flag("checkpoint_dir"), j.checkpoint_dir,
                   "Write a checkpoint (parameters, optimizer, data position) here after every epoch; "
                   "SIGINT/SIGTERM also write one before exiting. With {host} in it (--dist mpi): one directory per "
                   "host, each written by the host's first rank, no shared storage needed");
  train
      .add_option(flag("checkpoint_every"), j.checkpoint_every,
                  "Also write a checkpoint every N steps (0: per epoch only)")
      ->capture_default_str();
  train.add_option(flag("keep_checkpoints"), j.keep_checkpoints, "How many of the newest checkpoints to keep")
      ->capture_default_str();
  train.add_flag(flag("resume"), j.resume,
                 "Continue from the newest intact checkpoint in --checkpoint-dir (same settings: the result is "
                 "bit for bit that of an uninterrupted run on the same devices)");
  train.add_option(flag("resume_run"), j.resume_run,
                   "With --resume: the run to continue (its id, as checkpoint-info prints it), where --checkpoint-dir "
                   "holds the checkpoints of several runs");
  train.add_flag(flag("share_checkpoint_dir"), j.share_checkpoint_dir,
                 "Start a fresh run in a --checkpoint-dir that holds another run's checkpoints, writing beside them "
                 "(each run prunes and resumes only its own); without it such a folder is refused");
  train.add_flag(flag("resume_if_any"), j.resume_if_any,
                 "As --resume, but start from the first step when no checkpoint is found (dptrain launch passes "
                 "it when it restarts a job)");
  train
      .add_option(flag("on_nan"), j.on_nan,
                  listing("A NaN/Inf loss or gradient: stop with the step and layer, or skip the update",
                          train::kOnNans))
      ->capture_default_str();
  train
      .add_option(flag("dist"), j.dist,
                  listing("none: the devices are threads of this process; mpi: processes started by mpirun -np N, "
                          "each running --devices (several per process: the allreduce sums within each process, "
                          "then between the processes), rank 0 alone printing and writing files",
                          train::kDists))
      ->capture_default_str();
  train
      .add_option(flag("bucket_mb"), j.bucket_mb,
                  "Allreduce the gradients in buckets of this many MiB, each as soon as backward has produced it "
                  "(overlapping communication with backward); 0: one allreduce after backward")
      ->capture_default_str();
  train
      .add_option(flag("grad_compression"), j.grad_compression,
                  listing("How the gradients travel between the processes of --dist mpi: none (float32), or bf16 "
                          "(rounded to bfloat16, half the bytes, summed in float32; not with --deterministic)",
                          parallel::kCompressions))
      ->capture_default_str();
  train
      .add_option(flag("zero"), j.zero,
                  "ZeRO stage (--api concise): 0 every device keeps the whole optimizer state; 1 each of the job's N "
                  "devices keeps 1/N of it (momentum, Adam's moments), the gradients reduce-scattered and the "
                  "parameters all-gathered (one allreduce's bytes); checkpoints hold the whole state")
      ->capture_default_str();
  train
      .add_option(flag("precision"), j.precision,
                  listing("Convolution arithmetic: fp32, or bf16 (operands rounded to bfloat16, fp32 accumulation "
                          "and outputs; needs a CPU with avx512_bf16; single-channel convolutions stay fp32). "
                          "Resume with the precision the run started with.",
                          ops::kConvPrecisions))
      ->capture_default_str();
  train
      .add_option(flag("conv_algorithm"), j.conv_algorithm,
                  listing("The CPU's 3x3 stride-1 convolutions in fp32 on 16-channel blocks (ResNet-18's): "
                          "winograd (oneDNN's Winograd F(4x4, 3x3): a quarter of the multiplies, rounding "
                          "errors a few times direct's) or direct (every product as written). Other convolutions, "
                          "bf16 and GPUs are direct either way",
                          ops::kConvAlgorithms))
      ->capture_default_str();
  train.add_flag(flag("deterministic"), j.deterministic,
                 "The same bits on any number of devices or processes: each batch is cut into chunks of "
                 "--chunk-size examples, each computed on one thread (BatchNorm on the chunk's statistics), and the "
                 "chunks' gradients summed in one fixed tree (no --bucket-mb)");
  train
      .add_option(flag("chunk_size"), j.chunk_size,
                  "--deterministic: examples per chunk; --batch-size must be a multiple of it")
      ->capture_default_str();
  train
      .add_option(flag("collective_timeout"), j.collective_timeout,
                  "--dist mpi: seconds a collective waits for the other processes before the whole job is stopped")
      ->capture_default_str();
  train
      .add_option(flag("progress"), j.progress,
                  listing("The progress line redrawn after every step: auto = on when stdout is a terminal and "
                          "the process was not started by mpirun, on, off",
                          train::kProgresses))
      ->capture_default_str();
  train.add_option(flag("trace_file"), j.trace_file,
                   "Write a Chrome/Perfetto trace (FILE.json: every device's and MPI rank's data, forward, "
                   "backward, allreduce of each bucket and update) and FILE.timeline.svg (a few steps, compute "
                   "against communication per device)");
}

void add_evaluate_flags(CLI::App& cmd, EvaluateSettings& s) {
  cmd.add_option(flag("checkpoint"), s.checkpoint,
                 "A step-*.ckpt file that dptrain train --checkpoint-dir wrote, or that folder (its newest intact "
                 "checkpoint)")
      ->required();
  cmd.add_option(flag("devices"), s.devices,
                 "Devices to evaluate on, each test batch split over them: cpu:N, cuda:0,cuda:1 or a count")
      ->capture_default_str();
  add_data_flags(cmd, s.data);
  cmd.add_option(flag("test_limit"), s.data.test_limit, "Evaluate on the first N test images only (0: all)")
      ->capture_default_str();
  cmd.add_option(flag("batch_size"), s.batch_size, "Test images per batch, split across the devices")
      ->capture_default_str();
  cmd.add_option(flag("confusion_svg"), s.confusion_svg, "Also draw the confusion matrix into this SVG file");
}

void add_predict_flags(CLI::App& cmd, PredictSettings& s) {
  cmd.add_option(flag("checkpoint"), s.checkpoint, "A step-*.ckpt file that dptrain train --checkpoint-dir wrote")
      ->required();
  cmd.add_option("images", s.images,
                 "Pictures (JPEG, PNG, PGM, BMP, ... of any size: brought to the channels and size the model was "
                 "trained on; for light-on-dark data such as Fashion-MNIST inverted when the border is bright and "
                 "padded square) or IDX images files of that size (taken as they are)")
      ->required();
  cmd.add_option(flag("top_k"), s.top_k, "How many of the most probable classes to print")->capture_default_str();
  add_max_image_pixels_flag(cmd, s.max_image_pixels);
  cmd.add_flag(flag("json"), s.json,
               "Print one JSON object per image: image, width, height, inverted, top (class, name, probability), "
               "logits");
}

void add_export_flags(CLI::App& cmd, ExportSettings& s) {
  cmd.add_option(flag("checkpoint"), s.checkpoint, "A step-*.ckpt file that dptrain train --checkpoint-dir wrote")
      ->required();
  cmd.add_option(flag("onnx_file"), s.onnx_file,
                 "Write the network here as an ONNX model (opset 13): input images [N, C, H, W] as the checkpoint "
                 "records them, output logits [N, classes]; BatchNorm in eval mode with its running statistics")
      ->required();
}

void add_launch_flags(CLI::App& cmd, launch::LaunchSettings& s, std::string& mpirun_args) {
  cmd.add_option("--hostfile", s.hostfile,
                 "Open MPI hostfile: one host per line, \"HOST slots=N\" for N processes on it (\"localhost "
                 "slots=3\" on one machine); read again after each failure, so hosts may be added")
      ->required();
  cmd.add_option("--min-hosts", s.min_hosts, "Give up when fewer hosts than this answer")->capture_default_str();
  cmd.add_option("--max-restarts", s.max_restarts, "Give up after this many restarts after failures")
      ->capture_default_str();
  cmd.add_option("--probe-timeout", s.probe_timeout,
                 "Seconds a host has to answer a probe (mpirun -np 1 true on it) before it is left out")
      ->capture_default_str();
  cmd.add_option("--readmit-every", s.readmit_every,
                 "Seconds between probes of the hosts left out while the job runs; one that answers is taken "
                 "back: the job checkpoints and restarts on more processes (0: never)")
      ->capture_default_str();
  cmd.add_option("--error-grace", s.error_grace,
                 "Seconds mpirun has to end by itself after a rank reported an error, before the launcher ends "
                 "it (it may wait forever for a dead host's daemon)")
      ->capture_default_str();
  cmd.add_option("--mpirun", s.mpirun, "The mpirun to run")->capture_default_str();
  cmd.add_option("--program", s.program,
                 "The dptrain the hosts run, where it is installed elsewhere there (default: this one's path)");
  cmd.add_option("--mpirun-args", mpirun_args,
                 "Arguments for every mpirun, split at spaces (e.g. \"--mca btl self,tcp --mca plm_rsh_agent ssh\")");
  cmd.add_option("train_flags", s.train_args, "dptrain train's flags, after --; --checkpoint-dir is required");
}

// dptrain train's flags given to launch, checked as train would check them.
train::JobConfig parse_train_flags(const std::vector<std::string>& args) {
  CLI::App app{"dptrain train"};
  train::JobConfig job;
  add_train_flags(app, job);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw std::runtime_error(std::string("launch: the train flags after --: ") + e.what());
  }
  train::validate(job);
  return job;
}

std::vector<std::string> split_at_spaces(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// `word` as a shell reads it back: as it is when plain, else in single quotes.
std::string shell_word(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                             "0123456789_-+=./,:@%{}") == std::string::npos;
  if (plain) return word;
  std::string quoted = "'";
  for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// CLI11's "not expected" for launch when it is train flags given before --: the same
// message naming the flags, and the command with them (and their values) after --. Empty
// for any other error, or when no unexpected word looks like a flag.
std::string train_flags_before_dashes(const CLI::App& launch, int argc, char** argv, const CLI::ParseError& e) {
  if (e.get_exit_code() != static_cast<int>(CLI::ExitCodes::ExtrasError)) return "";
  int at = 1;
  while (at < argc && launch.get_name() != argv[at]) ++at;
  std::vector<std::string> kept{"dptrain", "launch"}, moved, flags;
  bool after_dashes = false;
  for (int i = at + 1; i < argc; ++i) {
    const std::string word = argv[i];
    const bool looks_like_flag = word.size() > 1 && word[0] == '-';
    if (after_dashes || word == "--") {
      if (after_dashes) moved.push_back(word);
      after_dashes = true;
      continue;
    }
    const std::string name = word.substr(0, word.find('='));
    const CLI::Option* option = looks_like_flag ? launch.get_option_no_throw(name) : nullptr;
    if (option != nullptr) {  // launch's own, and its value
      kept.push_back(word);
      if (name == word && option->get_items_expected_min() > 0 && i + 1 < argc) kept.push_back(argv[++i]);
      continue;
    }
    if (looks_like_flag) flags.push_back(word);
    moved.push_back(word);
  }
  if (flags.empty()) return "";
  std::string message = flags.size() == 1 ? "The following argument was not expected:"
                                          : "The following arguments were not expected:";
  for (const std::string& flag : flags) message += " " + flag;
  message += "\ndptrain train's flags go after --:";
  for (const std::string& word : kept) message += " " + shell_word(word);
  message += " --";
  for (const std::string& word : moved) message += " " + shell_word(word);
  return message;
}

}  // namespace

int run(int argc, char** argv, const CliHooks& hooks) {
  CLI::App app{"dptrain: data-parallel training of convolutional networks on your images (Fashion-MNIST by default)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("dptrain ") + kVersion, "Print the version and exit");
  train::JobConfig job;
  CLI::App* train = app.add_subcommand("train", "Train a model and report accuracy and speed");
  add_train_flags(*train, job);
  std::string checkpoint_file;
  CLI::App* info = app.add_subcommand("checkpoint-info", "Check a checkpoint file and print what it holds");
  info->add_option("file", checkpoint_file, "A step-*.ckpt file from --checkpoint-dir")->required();
  EvaluateSettings evaluate;
  CLI::App* evaluate_cmd = app.add_subcommand(
      "evaluate", "Test accuracy of a checkpoint, per class, and its confusion matrix (text, and SVG on request)");
  add_evaluate_flags(*evaluate_cmd, evaluate);
  PredictSettings predict;
  CLI::App* predict_cmd =
      app.add_subcommand("predict", "Classify pictures with a checkpoint: the top-k classes and their probabilities");
  add_predict_flags(*predict_cmd, predict);
  ExportSettings export_settings;
  CLI::App* export_cmd = app.add_subcommand("export", "Write a checkpoint's network as an ONNX model");
  add_export_flags(*export_cmd, export_settings);
  launch::LaunchSettings launch_settings;
  std::string mpirun_args;
  CLI::App* launch_cmd = app.add_subcommand(
      "launch", "Run a training job with mpirun on the hosts of a hostfile and keep it going: after a failure, "
                "restart it on the hosts that answer, from its newest checkpoint (dptrain launch --hostfile FILE "
                "-- TRAIN FLAGS)");
  add_launch_flags(*launch_cmd, launch_settings, mpirun_args);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (launch_cmd->parsed()) {  // train flags before --: say where they go
      if (const std::string hint = train_flags_before_dashes(*launch_cmd, argc, argv, e); !hint.empty())
        return app.exit(CLI::ExtrasError(hint, e.get_exit_code()));
    }
    return app.exit(e);
  }
  const report::JobHooks job_hooks{hooks.wrap_communicator, with_flags, hooks.check_replicas};
  if (evaluate_cmd->parsed()) return run_evaluate(evaluate, with_flags);
  if (predict_cmd->parsed()) return run_predict(predict, with_flags);
  if (export_cmd->parsed()) return run_export(export_settings, with_flags);
  if (launch_cmd->parsed()) {
    launch_settings.mpirun_args = split_at_spaces(mpirun_args);
    return reporting_errors(with_flags, [&] {
      // Checked as every rank will check them: under --dist mpi.
      return launch::launch(launch_settings, parse_train_flags(launch::rank_train_flags(launch_settings.train_args)));
    });
  }
  return info->parsed() ? report::show_checkpoint(checkpoint_file, job_hooks) : report::run_job(job, job_hooks);
}

}  // namespace dpt::cli
