#include "dpt/nn/models.h"

#include <string>

namespace dpt::nn {

std::unique_ptr<Sequential> lenet_module() {
  auto net = std::make_unique<Sequential>();
  net->add<Conv2d>("conv1", 1, 20, 3)
      .add<ReLU>("relu1")
      .add<AvgPool2d>("pool1", 2, 2)
      .add<Conv2d>("conv2", 20, 50, 5)
      .add<ReLU>("relu2")
      .add<AvgPool2d>("pool2", 2, 2)
      .add<Flatten>("flatten")
      .add<Linear>("fc1", 800, 128)
      .add<ReLU>("relu3")
      .add<Linear>("fc2", 128, 10);
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

std::unique_ptr<Sequential> resnet18(int64_t num_classes, int64_t in_channels) {
  auto net = std::make_unique<Sequential>();
  net->add<Conv2d>("conv", in_channels, 64, 3, 1, 1).add<BatchNorm2d>("bn", 64).add<ReLU>("relu");
  net->add("stage1", resnet_stage(64, 64, true));
  net->add("stage2", resnet_stage(64, 128, false));
  net->add("stage3", resnet_stage(128, 256, false));
  net->add("stage4", resnet_stage(256, 512, false));
  net->add<GlobalAvgPool2d>("global_avg_pool").add<Flatten>("flatten").add<Linear>("fc", 512, num_classes);
  return net;
}

}  // namespace dpt::nn
