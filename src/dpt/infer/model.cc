#include "dpt/infer/model.h"

#include <system_error>
#include <vector>

#include "dpt/checkpoint/checkpoint_dir.h"
#include "dpt/nn/registry.h"
#include "dpt/train/train_from_scratch.h"

namespace dpt::infer {

TrainedModel rebuild(const checkpoint::Checkpoint& checkpoint, const std::string& source) {
  TrainedModel out;
  out.model = checkpoint.model;
  out.data = checkpoint.data;
  const int64_t classes = static_cast<int64_t>(checkpoint.data.classes.size());
  out.epochs = static_cast<int64_t>(checkpoint.history.size());
  out.global_step = checkpoint.position.global_step;
  std::vector<checkpoint::NamedTensor> params = checkpoint.params;
  // The from-scratch LeNet's parameters are the concise LeNet's (renamed below).
  const std::string name = checkpoint.model == train::kScratchModelName ? "lenet" : checkpoint.model;
  if (!nn::has_model(name)) {
    std::string known = "'" + std::string(train::kScratchModelName) + "'";
    for (const std::string& m : nn::model_names()) known += ", '" + m + "'";
    throw checkpoint::CheckpointError("checkpoint " + source + " records the model '" + checkpoint.model +
                                      "', which this dptrain cannot build (it builds " + known +
                                      "; a program of yours registers its own with nn::register_model)");
  }
  out.net = nn::build_model(name, checkpoint.data.shape, classes);
  const std::vector<std::pair<std::string, Tensor>> named = out.net->named_parameters();
  if (checkpoint.model == train::kScratchModelName && params.size() == named.size()) {
    // W1, b1, ..., b4: the concise LeNet's parameters in the same order and shapes.
    for (size_t i = 0; i < params.size(); ++i) params[i].name = named[i].first;
  }
  checkpoint::copy_into(params, named, "parameters", source);
  checkpoint::copy_into(checkpoint.buffers, out.net->named_buffers(), "buffers", source);
  out.net->eval();
  return out;
}

TrainedModel load_trained(const std::filesystem::path& file) {
  std::error_code error;
  if (!std::filesystem::exists(file, error)) {
    throw checkpoint::CheckpointError("checkpoint " + file.string() +
                                      " does not exist (pass a step-*.ckpt file that `checkpoint_dir` wrote)");
  }
  if (std::filesystem::is_directory(file, error)) {
    // A checkpoint directory: its newest checkpoint that reads (of its one run).
    checkpoint::Loaded newest = checkpoint::load_latest(file);
    return rebuild(newest.checkpoint, newest.file.string());
  }
  return rebuild(checkpoint::load(file), file.string());
}

}  // namespace dpt::infer
