#include "dpt/nn/models.h"

#include <string>

#include "dpt/core/config_error.h"

namespace dpt::nn {

void check_input(const std::string& model, const ImageShape& input, int64_t min_side, int64_t num_classes) {
  if (input.channels < 1) throw ConfigError("channels", model + " needs images of at least 1 channel, got " + input.str());
  if (input.height < min_side || input.width < min_side) {
    throw ConfigError("image_size", model + " needs images of at least " + std::to_string(min_side) + "x" +
                                        std::to_string(min_side) + ", got " + std::to_string(input.height) + "x" +
                                        std::to_string(input.width) + "; pass `image_size` " +
                                        std::to_string(min_side) + " or more");
  }
  if (num_classes < 2) {
    throw ConfigError("data_dir", model + " needs at least 2 classes to tell apart, the data has " +
                                      std::to_string(num_classes) + "; check the labels");
  }
}

int64_t lenet_flat_features(const ImageShape& input) {
  // conv 3x3 (no padding), pool 2/2, conv 5x5, pool 2/2; the pools drop an odd last row.
  const auto side = [](int64_t s) { return ((s - 2) / 2 - 4) / 2; };
  return 50 * side(input.height) * side(input.width);
}

std::unique_ptr<Sequential> lenet_module(const ImageShape& input, int64_t num_classes) {
  check_input("LeNet", input, kLenetMinSide, num_classes);
  auto net = std::make_unique<Sequential>();
  net->add<Conv2d>("conv1", input.channels, 20, 3)
      .add<ReLU>("relu1")
      .add<AvgPool2d>("pool1", 2, 2)
      .add<Conv2d>("conv2", 20, 50, 5)
      .add<ReLU>("relu2")
      .add<AvgPool2d>("pool2", 2, 2)
      .add<Flatten>("flatten")
      .add<Linear>("fc1", lenet_flat_features(input), 128)
      .add<ReLU>("relu3")
      .add<Linear>("fc2", 128, num_classes);
  return net;
}

namespace {
std::unique_ptr<Sequential> resnet_stage(int64_t in_channels, int64_t out_channels, bool first_stage) {
  auto stage = std::make_unique<Sequential>();
  // Every stage but the first halves the resolution and changes the width in its first block.
  stage->add<Residual>("block0", in_channels, out_channels, !first_stage, first_stage ? 1 : 2);
  stage->add<Residual>("block1", out_channels, out_channels);
  return stage;
}
}  // namespace

std::unique_ptr<Sequential> resnet18(const ImageShape& input, int64_t num_classes) {
  check_input("ResNet-18", input, kResnetMinSide, num_classes);
  auto net = std::make_unique<Sequential>();
  net->add<Conv2d>("conv", input.channels, 64, 3, 1, 1).add<BatchNorm2d>("bn", 64).add<ReLU>("relu");
  net->add("stage1", resnet_stage(64, 64, true));
  net->add("stage2", resnet_stage(64, 128, false));
  net->add("stage3", resnet_stage(128, 256, false));
  net->add("stage4", resnet_stage(256, 512, false));
  net->add<GlobalAvgPool2d>("global_avg_pool").add<Flatten>("flatten").add<Linear>("fc", 512, num_classes);
  return net;
}

}  // namespace dpt::nn
