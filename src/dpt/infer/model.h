// A trained network back from its checkpoint: the model the checkpoint records, rebuilt
// as a Module, with the checkpoint's parameters and buffers, in eval mode (BatchNorm with
// its running statistics). Both APIs' checkpoints load as the same Sequential: the
// from-scratch LeNet's W1, b1, ..., W4, b4 have exactly the shapes and the arithmetic of
// the concise LeNet's conv1.weight, conv1.bias, ..., fc2.bias, in that order.
#pragma once

#include <array>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "dpt/checkpoint/checkpoint.h"
#include "dpt/nn/layers.h"

namespace dpt::infer {

struct TrainedModel {
  std::string model;  // as the checkpoint records it, e.g. "lenet (scratch API)"
  data::DataInfo data;  // what it was trained on: input shape, classes, polarity, normalization
  std::unique_ptr<nn::Module> net;
  int64_t epochs = 0;     // finished epochs of the run that wrote it
  int64_t global_step = 0;
};

// Rebuilds `checkpoint`'s model and copies its tensors in; throws CheckpointError naming
// `source` for a model dptrain cannot build or tensors that do not fit it.
TrainedModel rebuild(const checkpoint::Checkpoint& checkpoint, const std::string& source);

// checkpoint::load(file), then rebuild(); `file` may be a checkpoint directory, whose
// newest intact checkpoint is taken. A missing file is a CheckpointError too:
// "checkpoint FILE does not exist".
TrainedModel load_trained(const std::filesystem::path& file);

}  // namespace dpt::infer
