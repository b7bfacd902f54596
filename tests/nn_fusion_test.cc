// The fusion pass (nn/fusion.h): which layers it fuses, in any network, and that a fused
// network trains and evaluates with the bits of the same network run layer by layer. The
// fused CPU kernels equal the composition of the reference kernels bit for bit
// (ops_layout_sweep_test checks both in every layout against double loops), and the
// backward graph hands every gradient on in the same order, so nothing here needs a
// tolerance: a wrong fusion (a ReLU dropped or doubled, a BatchNorm's running statistics
// left alone, a mask from the wrong tensor) changes values by far more than a rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dpt/data/idx_dataset.h"
#include "dpt/autograd/engine.h"
#include "dpt/autograd/node.h"
#include "dpt/core/tensor.h"
#include "dpt/nn/fold.h"
#include "dpt/nn/fusion.h"
#include "dpt/nn/init.h"
#include "dpt/nn/layers.h"
#include "dpt/nn/models.h"
#include "dpt/ops/fused_kernels.h"
#include "dpt/ops/ops.h"
#include "dpt/ops/precision.h"
#include "dpt/ops/testing.h"
#include "test_support.h"

using dpt::Tensor;
namespace nn = dpt::nn;
namespace ops = dpt::ops;

namespace {
using dpt::testing_support::random_images;

// Runs the test body with the pass (this thread's execution options) and the backends' fused
// kernels (a test-only switch, ops/testing.h) on or off, restoring both.
class Fusion {
 public:
  Fusion(bool pass, bool kernels) : scope_(ops::ExecutionOptions{.fusion = pass}) { ops::set_fused_kernels(kernels); }
  ~Fusion() { ops::set_fused_kernels(true); }
  Fusion(const Fusion&) = delete;
  Fusion& operator=(const Fusion&) = delete;

 private:
  ops::ExecutionScope scope_;
};

std::string last_op(const Tensor& t) { return t.grad_fn() ? t.grad_fn()->op : "<none>"; }

// Everything one training step of `net` leaves, by name: the loss, the logits, every
// parameter's gradient and every buffer (BatchNorm's running statistics).
using Named = std::vector<std::pair<std::string, std::vector<float>>>;
Named training_step(nn::Module& net, const Tensor& X, const Tensor& y) {
  net.train();
  net.zero_grad();
  const Tensor logits = net(X);
  const Tensor loss = ops::cross_entropy(logits, y);
  dpt::autograd::backward(loss);
  Named all{{"loss", loss.to_vector()}, {"logits", logits.to_vector()}};
  // A parameter the step never reached has no gradient: an empty entry, which fails the size check.
  for (const auto& [name, p] : net.named_parameters())
    all.emplace_back("grad " + name, p.grad().defined() ? p.grad().to_vector() : std::vector<float>{});
  for (const auto& [name, b] : net.named_buffers()) all.emplace_back(name, b.to_vector());
  return all;
}

Named evaluation(nn::Module& net, const Tensor& X) {
  net.eval();
  dpt::autograd::NoGradGuard no_grad;
  return {{"logits", net(X).to_vector()}};
}

// Every value the same, except in the entries named in `rounded`, which may differ by
// float rounding (relative 1e-4 of max(1, |value|)).
void expect_same_bits(const Named& fused, const Named& reference, const std::string& what,
                      const std::vector<std::string>& rounded = {}) {
  ASSERT_EQ(fused.size(), reference.size()) << what;
  for (size_t k = 0; k < fused.size(); ++k) {
    const auto& [name, got] = fused[k];
    const std::vector<float>& want = reference[k].second;
    ASSERT_EQ(got.size(), want.size()) << what << ", " << name;
    const bool near = std::find(rounded.begin(), rounded.end(), name) != rounded.end();
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const bool ok = near ? std::abs(got[i] - want[i]) <= 1e-4f * std::max(1.0f, std::abs(want[i])) : got[i] == want[i];
      if (!ok && differ++ == 0) first = i;
    }
    EXPECT_EQ(differ, 0u) << what << ", " << name << ": " << differ << " of " << got.size()
                          << " values differ, the first at " << first << " (" << got[first] << " vs " << want[first]
                          << ")";
  }
}

// A network that is neither LeNet nor ResNet, with every pattern the pass knows and names of
// its own: the pass matches layer types, never names.
std::unique_ptr<nn::Sequential> patterned_net() {
  auto net = std::make_unique<nn::Sequential>();
  net->add<nn::Conv2d>("a", 1, 8, 3, 1, 1)
      .add<nn::BatchNorm2d>("b", 8)
      .add<nn::ReLU>("c")                   // conv, BatchNorm, ReLU
      .add<nn::Conv2d>("d", 8, 16, 3)
      .add<nn::ReLU>("e")
      .add<nn::AvgPool2d>("f", 2, 2)        // conv, ReLU, pool
      .add<nn::Residual>("g", 16, 16)       // conv, BatchNorm, ReLU and the tail BatchNorm, add, ReLU
      .add<nn::Conv2d>("h", 16, 16, 1)
      .add<nn::ReLU>("i")                   // conv, ReLU
      .add<nn::BatchNorm2d>("j", 16)
      .add<nn::ReLU>("k")                   // BatchNorm, ReLU
      .add<nn::GlobalAvgPool2d>("l")
      .add<nn::Flatten>("m")
      .add<nn::Linear>("n", 16, 10);
  nn::init_weights(*net, nn::Init::kaiming, 3);
  return net;
}

// The op that produced the output of layers [0, count) of `net`'s layers.
std::string op_after(const nn::Sequential& net, size_t count, const Tensor& x) {
  std::vector<nn::Module*> layers;
  for (const auto& [name, layer] : net.named_children()) {
    if (layers.size() == count) break;
    layers.push_back(const_cast<nn::Module*>(layer));
  }
  return last_op(nn::run_layers(layers, x));
}

TEST(FusionPass, FusesEveryPatternByLayerType) {
  auto net = patterned_net();
  const Tensor X = random_images(4, 1, 12).first;
  EXPECT_EQ(op_after(*net, 3, X), "batch_norm_relu2d");
  EXPECT_EQ(op_after(*net, 6, X), "conv2d_relu_avg_pool2d");
  EXPECT_EQ(op_after(*net, 7, X), "add_relu");
  EXPECT_EQ(op_after(*net, 9, X), "conv2d_relu");
  EXPECT_EQ(op_after(*net, 11, X), "batch_norm_relu2d");
}

TEST(FusionPass, OffRunsEveryLayerAsItsOwnOp) {
  auto net = patterned_net();
  const Tensor X = random_images(4, 1, 12).first;
  const Fusion off(/*pass=*/false, /*kernels=*/true);
  for (size_t count : {3, 7, 9, 11}) EXPECT_EQ(op_after(*net, count, X), "relu") << count << " layers";
  EXPECT_EQ(op_after(*net, 6, X), "avg_pool2d");
}

TEST(FusionPass, WithoutFusedKernelsTheFusedOpsCompose) {
  auto net = patterned_net();
  const Tensor X = random_images(4, 1, 12).first;
  const Fusion composed(/*pass=*/true, /*kernels=*/false);
  EXPECT_EQ(op_after(*net, 3, X), "relu");  // batch_norm_relu2d composed: relu(batch_norm2d)
  EXPECT_EQ(op_after(*net, 7, X), "relu");  // add_relu composed: relu(add)
}

TEST(FusionPass, LeavesSynchronizedBatchNormUnfused) {
  auto net = patterned_net();
  ops::ReplicaSum alone;  // one replica: the sums are its own
  alone.floats = [](float*, size_t) {};
  alone.ints = [](int64_t*, size_t) {};
  net->synchronize_batch_norm(std::make_shared<const ops::ReplicaSum>(alone));
  EXPECT_EQ(op_after(*net, 3, random_images(4, 1, 12).first), "relu");
}

TEST(FusionPass, FoldedBatchNormJoinsItsConvolutionsReLU) {
  auto net = patterned_net();
  net->eval();
  net->fold_batch_norms();
  EXPECT_EQ(op_after(*net, 3, random_images(4, 1, 12).first), "conv2d_relu");
}

// The same network, fused and layer by layer, from the same initial values: the same bits
// after a training step (loss, logits, gradients, running statistics) and in evaluation,
// except for the gradients named in `rounded`.
void expect_fusion_changes_no_bit(const std::function<std::unique_ptr<nn::Module>()>& make, int64_t batch,
                                  int64_t side, const std::vector<std::string>& rounded = {}) {
  const auto [X, y] = random_images(batch, 11, side);
  auto fused_net = make(), reference_net = make();
  Named reference_step, reference_eval, reference_fold;
  {
    const Fusion off(/*pass=*/false, /*kernels=*/false);
    reference_step = training_step(*reference_net, X, y);
    reference_eval = evaluation(*reference_net, X);
    reference_fold = evaluation(*nn::fold_batch_norm(*reference_net), X);
  }
  expect_same_bits(training_step(*fused_net, X, y), reference_step, "training step", rounded);
  expect_same_bits(evaluation(*fused_net, X), reference_eval, "evaluation");
  expect_same_bits(evaluation(*nn::fold_batch_norm(*fused_net), X), reference_fold, "evaluation, BatchNorm folded");
}

TEST(FusionPass, PatternedNetworkKeepsEveryBit) {
  expect_fusion_changes_no_bit([] { return patterned_net(); }, 4, 12);
}

TEST(FusionPass, Resnet18KeepsEveryBit) {
  expect_fusion_changes_no_bit(
      [] {
        std::unique_ptr<nn::Module> net = nn::resnet18(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
        nn::init_weights(*net, nn::Init::kaiming, 4);
        return net;
      },
      4, 28);
}

// LeNet's first block (its input needs no gradient) runs as one kernel whose weight and bias
// gradients add the same products in another order (ops_gradcheck_test's
// Conv2dReluAvgPool.FirstLayerGradientsMatchTheComposedBackward): those two alone round
// differently; everything else keeps its bits.
TEST(FusionPass, LenetKeepsEveryBitButItsFirstLayersGradients) {
  expect_fusion_changes_no_bit(
      [] {
        std::unique_ptr<nn::Module> net = nn::lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
        nn::init_weights(*net, nn::Init::kaiming, 5);
        return net;
      },
      8, 28, {"grad conv1.weight", "grad conv1.bias"});
}

}  // namespace
