// The inference layer: picture preprocessing, softmax, the confusion matrix's figures, and
// a from-scratch LeNet checkpoint rebuilt as the concise Sequential computing the same logits.
#include <gtest/gtest.h>

#include <cmath>

#include "dpt/data/idx_dataset.h"
#include "dpt/autograd/node.h"
#include "dpt/checkpoint/checkpoint.h"
#include "dpt/infer/evaluation.h"
#include "dpt/infer/image.h"
#include "dpt/infer/model.h"
#include "dpt/infer/predict.h"
#include "dpt/nn/layers.h"
#include "dpt/nn/lenet.h"
#include "dpt/nn/registry.h"
#include "dpt/ops/ops.h"
#include "dpt/report/evaluation_report.h"
#include "dpt/train/train_from_scratch.h"

namespace dpt::infer {
namespace {

TEST(InferImage, BrightBorderIsInvertedAndPaddedSquare) {
  // 56 wide, 28 high: white background, one black pixel block in the middle.
  std::vector<uint8_t> grey(56 * 28, 255);
  for (int y = 10; y < 18; ++y)
    for (int x = 24; x < 32; ++x) grey[y * 56 + x] = 0;
  const InputImage image = preprocess({56, 28, 1, grey}, data::fashion_mnist_info(), "test");
  EXPECT_TRUE(image.inverted);
  ASSERT_EQ(image.pixels.size(), 28u * 28u);
  EXPECT_NEAR(image.pixels[0], 0.0f, 1e-6);            // padding: black
  EXPECT_GT(image.pixels[14 * 28 + 14], 0.5f);          // the object, now light
  EXPECT_NEAR(image.pixels[7 * 28 + 3], 0.0f, 0.02f);   // inverted background
}

TEST(InferImage, DarkBorderIsKept) {
  std::vector<uint8_t> grey(28 * 28, 10);
  grey[14 * 28 + 14] = 200;
  const InputImage image = preprocess({28, 28, 1, grey}, data::fashion_mnist_info(), "test");
  EXPECT_FALSE(image.inverted);
  EXPECT_FLOAT_EQ(image.pixels[14 * 28 + 14], 200.0f / 255.0f);
}

// Data recorded as dark on light (photographs): never inverted, no square padding, colour kept.
TEST(InferImage, ColourModelKeepsPolarityAndColour) {
  data::DataInfo info;
  info.shape = {3, 4, 4};
  info.classes = {"a", "b"};
  info.mean = {0.5f, 0.5f, 0.5f};
  info.stddev = {0.25f, 0.25f, 0.25f};
  std::vector<uint8_t> rgb(8 * 4 * 3, 255);  // 8 wide, 4 high, white: a bright border
  const InputImage image = preprocess({8, 4, 3, rgb}, info, "photo");
  EXPECT_FALSE(image.inverted);
  ASSERT_EQ(image.pixels.size(), 3u * 4u * 4u);
  for (float v : image.pixels) EXPECT_FLOAT_EQ(v, (1.0f - 0.5f) / 0.25f);  // white, normalized
}

TEST(InferPredict, SoftmaxSumsToOneAndKeepsOrder) {
  const std::vector<double> p = softmax({1000.0f, 999.0f, -5.0f});
  EXPECT_NEAR(p[0] + p[1] + p[2], 1.0, 1e-12);
  EXPECT_NEAR(p[0] / p[1], std::exp(1.0), 1e-9);
}

TEST(InferEvaluation, FiguresFromTheMatrix) {
  Evaluation e{2, {3, 1, 0, 4}};
  EXPECT_EQ(e.examples(), 8);
  EXPECT_EQ(e.correct(), 7);
  EXPECT_DOUBLE_EQ(e.accuracy(), 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(e.class_accuracy(0), 0.75);
  EXPECT_NE(report::confusion_svg(e, {"a<b", "c"}, "t").find("a&lt;b"), std::string::npos);
}

TEST(InferModel, ScratchCheckpointGivesTheScratchLogits) {
  const std::vector<Tensor> params = nn::lenet_params(7, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  checkpoint::Checkpoint ckpt;
  ckpt.model = train::kScratchModelName;
  ckpt.data = data::fashion_mnist_info();
  for (const Tensor& p : params) ckpt.params.push_back(checkpoint::to_named(p.name(), p));
  TrainedModel trained = rebuild(ckpt, "test.ckpt");
  std::vector<float> x(2 * 28 * 28);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) / 97.0f;
  const Tensor X = Tensor::from_vector(x, {2, 1, 28, 28});
  autograd::NoGradGuard no_grad;
  const std::vector<float> want = nn::lenet(X, params).to_vector();
  const std::vector<float> got = (*trained.net)(X).to_vector();
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(want[i], got[i]);
}

// A model of the user's own, registered by name: a checkpoint of it rebuilds into it, with
// its trained values (what evaluate, predict and export then use).
class Tiny : public nn::Cloneable<Tiny> {
 public:
  Tiny(const ImageShape& in, int64_t classes) {
    register_module("fc", std::make_unique<nn::Linear>(in.numel(), classes));
  }
  Tensor forward(const Tensor& x) override { return child(0)(ops::flatten(x)); }
};

TEST(InferModel, ARegisteredModelOfYourOwnRebuildsFromItsCheckpoint) {
  if (!nn::has_model("tiny_test_model")) {
    nn::register_model("tiny_test_model", [](const ImageShape& in, int64_t classes) {
      return std::make_unique<Tiny>(in, classes);
    });
  }
  EXPECT_THROW(nn::register_model("tiny_test_model", [](const ImageShape& in, int64_t c) {
                 return std::make_unique<Tiny>(in, c);
               }),
               std::invalid_argument);
  data::DataInfo info;
  info.shape = {1, 2, 2};
  info.classes = {"a", "b", "c"};
  const std::unique_ptr<nn::Module> saved = nn::build_model("tiny_test_model", info.shape, 3);
  checkpoint::Checkpoint ckpt;
  ckpt.model = "tiny_test_model";
  ckpt.data = info;
  for (const auto& [name, t] : saved->named_parameters()) {
    std::vector<float> values(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i) - 1.0f;
    ckpt.params.push_back({name, t.shape(), values});
  }
  TrainedModel trained = rebuild(ckpt, "tiny.ckpt");
  ASSERT_NE(dynamic_cast<Tiny*>(trained.net.get()), nullptr);
  EXPECT_EQ(trained.net->named_parameters()[0].second.to_vector(), ckpt.params[0].values);
  EXPECT_FALSE(trained.net->is_training());
}

TEST(InferModel, UnknownModelIsRefused) {
  checkpoint::Checkpoint ckpt;
  ckpt.model = "vgg16";
  EXPECT_THROW(rebuild(ckpt, "x.ckpt"), checkpoint::CheckpointError);
}

}  // namespace
}  // namespace dpt::infer
