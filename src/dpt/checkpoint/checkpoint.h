// Checkpoint: everything an interrupted training run needs to continue exactly where it
// stopped: the parameters and buffers (one replica's: every replica holds the same),
// the optimizer's state, the data loader's position, the epoch's running sums and
// the history of finished epochs. Parameters are stored by name in plain row-major f32,
// independent of the devices that wrote them, so a checkpoint written on N devices loads
// on M.
//
// The loader's shuffling is a pure function of (seed, epoch) and training draws no other
// random numbers, so the seed and the position are the whole random state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <utility>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "dpt/checkpoint/epoch_stats.h"
#include "dpt/core/tensor.h"
#include "dpt/data/fashion_mnist.h"
#include "dpt/parallel/step_result.h"

namespace dpt::checkpoint {

// A checkpoint that cannot be used: damaged, truncated, from another format version or
// written for another run. The message names the file, the cause and what to do.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct NamedTensor {
  std::string name;
  Shape shape;
  std::vector<float> values;  // shape_numel(shape) values, row-major
};

NamedTensor to_named(const std::string& name, const Tensor& t);

// Where training stands: the next batch to train is batch `batch_offset` of epoch `epoch`
// (0-based); `global_step` counts the steps taken since the run began.
struct Position {
  int64_t epoch = 0;
  int64_t batch_offset = 0;
  int64_t global_step = 0;
};

struct Checkpoint {
  // The run that wrote it: a random id a fresh run draws, which a resumed run keeps. A run
  // prunes and resumes only its own run's checkpoints (checkpoint_dir.h); files written
  // before it was recorded read as "".
  std::string run_id;
  // What the resumed run must share for the result to be exact.
  std::string model;  // e.g. "lenet (scratch API)"
  uint64_t seed = 0;
  int64_t batch_size = 0;
  int64_t train_examples = 0;
  std::vector<std::string> devices;  // written on; informational (any device count loads)
  int64_t deterministic_chunk = 0;   // the deterministic mode's chunk size; 0: the default mode
  // The learning-rate schedule (optim/lr_schedule.h) and gradient accumulation; files
  // written before them read as constant, no warmup, no scaling, 1 micro-batch per update.
  std::string lr_schedule = "constant";
  int64_t warmup_epochs = 0;
  std::string lr_scaling = "none";
  int64_t accumulate = 1;
  // Further settings that change the result (the learning rate, the optimizer's and the
  // loss's parameters, the arithmetic), by field name, values as text; compared on resume
  // (train::RunOptions). Files written before them hold none, and are not compared.
  std::vector<std::pair<std::string, std::string>> settings;
  // The data the model was trained on: input shape, class names, polarity, normalization.
  // evaluate, predict and export rebuild the model and read pictures from it; resuming
  // against other data is refused. Files written before it was recorded held Fashion-MNIST
  // models, and read as Fashion-MNIST's: the default.
  data::DataInfo data = data::fashion_mnist_info();

  Position position;
  parallel::StepResult epoch_sum;  // the steps of the current epoch so far
  double epoch_seconds = 0;     // training time of the current epoch so far
  std::vector<EpochStats> history;

  // The optimizer (optim/optimizer.h: "sgd", "adam", "adamw") and its updates so far;
  // files written before it was recorded read as SGD's.
  std::string optimizer = "sgd";
  int64_t optimizer_steps = 0;

  std::vector<NamedTensor> params;
  std::vector<NamedTensor> buffers;  // e.g. BatchNorm running statistics
  // The optimizer's per-parameter state, named "SLOT/PARAMETER" (momentum/W1, exp_avg/W1,
  // exp_avg_sq/W1); a parameter not yet stepped has none.
  std::vector<NamedTensor> optimizer_state;
};

// The slots optimizer_state may hold (optim/optimizer.h's).
inline constexpr const char* kOptimizerSlots[] = {"momentum", "exp_avg", "exp_avg_sq"};

// The file format, version 1, little-endian:
//   "DPTCKPT\n"  u32 version  u64 body_bytes  body  u32 crc32(everything before it)
//   body: u64 json_bytes, the metadata as JSON, u32 tensor count, then per tensor
//         u32 name_bytes, name ("param/...", "buffer/...", "momentum/...", "exp_avg/...",
//         "exp_avg_sq/..."), u32 ndim,
//         i64 dims[ndim], f32 values[numel]
inline constexpr uint32_t kFormatVersion = 1;

std::vector<uint8_t> encode(const Checkpoint& checkpoint);


// Throws CheckpointError naming `source` for anything but an intact version-1 file.
Checkpoint decode(std::span<const uint8_t> bytes, const std::string& source);

// The metadata of a checkpoint file (run, settings, position; no tensors), read without
// reading its tensors or checking its checksum: what a folder's pruning and listing need.
// Throws CheckpointError naming the file when its header or metadata does not read.
Checkpoint read_metadata(const std::filesystem::path& file);

// Copies a named tensor list into `tensors` (matched by name, shapes checked); throws
// CheckpointError naming the first tensor that is missing, extra or of another shape.
void copy_into(const std::vector<NamedTensor>& saved, const std::vector<std::pair<std::string, Tensor>>& tensors,
               const std::string& what, const std::string& source);

}  // namespace dpt::checkpoint
