#include "dpt/infer/model.h"

#include <system_error>
#include <vector>

#include "dpt/checkpoint/checkpoint_dir.h"
#include "dpt/nn/models.h"
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
  if (checkpoint.model == train::kScratchModelName || checkpoint.model == "lenet") {
    out.net = nn::lenet_module(checkpoint.data.shape, classes);
  } else if (checkpoint.model == "resnet18") {
    out.net = nn::resnet18(checkpoint.data.shape, classes);
  } else {
    std::string known;
    for (std::string_view m : kCheckpointModels) known += (known.empty() ? "'" : ", '") + std::string(m) + "'";
    throw checkpoint::CheckpointError("checkpoint " + source + " records the model '" + checkpoint.model +
                                      "', which this dptrain cannot build (it builds " + known + ")");
  }
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
  return rebuild(checkpoint::load(file), file.string());
}

}  // namespace dpt::infer
