// nn::fold_batch_norm: evaluation with every BatchNorm folded into the convolution before it
// equals the unfolded evaluation.
//
// Tolerance. Folding changes only roundings: each folded weight W s is rounded once
// (relative error <= u = 2^-24) where the unfolded path rounds the convolution's output and
// BatchNorm's arithmetic (a few u relative per element). Either way a layer's output moves
// by a few u times the sum of the absolute terms of its convolution, which is what the
// float convolution itself already rounds by (up to lambda sqrt(K) u, K <= 4608 terms:
// about 3e-5 relative in the worst case, ops_layout_sweep_test), and BatchNorm renormalises
// the scale layer by layer. Over ResNet-18's 18 layers of that kind, errors that add up in
// the worst case stay below 18 * 3e-5 = 5.4e-4 of the logits' scale; measured: about 1e-6
// (see the test's output). The check is |folded - unfolded| <= 5e-4 * max |unfolded logit|.
// A folding bug (a wrong channel's scale, a missing beta or mean) moves logits by O(1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

#include "dpt/data/idx_dataset.h"
#include "dpt/autograd/node.h"
#include "dpt/core/random.h"
#include "dpt/core/tensor.h"
#include "dpt/nn/fold.h"
#include "dpt/nn/init.h"
#include "dpt/nn/layers.h"
#include "dpt/nn/models.h"
#include "dpt/parallel/data_parallel.h"
#include "test_support.h"

using dpt::Tensor;
namespace nn = dpt::nn;

namespace {
using dpt::testing_support::random_images;
using dpt::testing_support::random_tensor;

// ResNet-18 with trained-ish BatchNorms: random gamma and beta, then running statistics
// from a few training-mode passes over random images (momentum 0.1, 6 passes: 47% of the
// way from the initial 0 and 1 to the activations' own statistics).
std::unique_ptr<nn::Sequential> trained_ish_resnet18() {
  auto net = nn::resnet18(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  nn::init_weights(*net, nn::Init::kaiming, 5);
  dpt::Rng rng(6);
  for (const auto& [name, p] : net->named_parameters()) {
    if (name.find("bn") == std::string::npos) continue;
    if (name.ends_with(".weight")) dpt::fill_uniform(p, 0.5f, 1.5f, rng);
    if (name.ends_with(".bias")) dpt::fill_uniform(p, -0.3f, 0.3f, rng);
  }
  dpt::autograd::NoGradGuard no_grad;
  net->train();
  for (uint64_t pass = 0; pass < 6; ++pass) (*net)(random_images(4, 100 + pass).first);
  net->eval();
  return net;
}

TEST(FoldBatchNorm, Resnet18EvaluationEqualsTheUnfoldedOne) {
  auto net = trained_ish_resnet18();
  const std::vector<float> before = [&] {
    std::vector<float> all;
    for (const Tensor& t : net->parameters()) {
      const std::vector<float> v = t.to_vector();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  }();
  // Running statistics really moved away from (0, 1).
  EXPECT_NE(net->buffers()[0].to_vector()[0], 0.0f);

  const std::unique_ptr<nn::Module> folded = nn::fold_batch_norm(*net);
  EXPECT_FALSE(folded->is_training());
  dpt::autograd::NoGradGuard no_grad;
  const Tensor X = random_images(8, 7).first;
  const std::vector<float> a = (*net)(X).to_vector(), b = (*folded)(X).to_vector();
  ASSERT_EQ(a.size(), b.size());
  double scale = 0, worst = 0;
  for (float v : a) scale = std::max(scale, static_cast<double>(std::abs(v)));
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  ASSERT_GT(scale, 0.1) << "the logits vanished: the test would prove little";
  EXPECT_LE(worst, 5e-4 * scale) << "largest logit " << scale;
  std::cout << "fold: largest |folded - unfolded| logit difference " << worst << " on logits up to " << scale << " ("
            << worst / scale << " of it)\n";
  RecordProperty("relative logit difference", std::to_string(worst / scale));

  // The module itself is unchanged, and the folded copy refuses to train.
  std::vector<float> after;
  for (const Tensor& t : net->parameters()) {
    const std::vector<float> v = t.to_vector();
    after.insert(after.end(), v.begin(), v.end());
  }
  EXPECT_EQ(after, before);
  folded->train();
  EXPECT_THROW((*folded)(X), std::logic_error);
}

TEST(FoldBatchNorm, AConvolutionWithoutBiasGetsOne) {
  nn::Sequential net;
  net.add<nn::Conv2d>("conv", 3, 5, 3, 1, 1, false).add<nn::BatchNorm2d>("bn", 5);
  nn::init_weights(net, nn::Init::kaiming, 1);
  dpt::Rng rng(2);
  for (const Tensor& t : net.buffers()) dpt::fill_uniform(t, 0.5f, 1.5f, rng);  // mean and var in [0.5, 1.5]
  for (const auto& [name, p] : net.named_parameters())
    if (name.starts_with("bn")) dpt::fill_uniform(p, -1.0f, 1.0f, rng);
  net.eval();
  const std::unique_ptr<nn::Module> folded = nn::fold_batch_norm(net);
  EXPECT_EQ(folded->parameters().size(), net.parameters().size() + 1);  // conv.bias added
  dpt::autograd::NoGradGuard no_grad;
  const Tensor X = random_tensor({2, 3, 6, 6}, 3);
  const std::vector<float> a = net(X).to_vector(), b = (*folded)(X).to_vector();
  ASSERT_EQ(a.size(), b.size());
  // One convolution of 27 terms of O(1) and a BatchNorm: a few float roundings.
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "element " << i;
}

// DataParallel evaluates folded copies in eval mode: the same predictions as the
// unfolded replicas (the counts are equal unless a logit pair sits within float rounding of
// a tie), and the replicas themselves are untouched.
TEST(FoldBatchNorm, DataParallelEvaluationCountsTheSameWithAndWithoutFolding) {
  std::unique_ptr<nn::Module> net = trained_ish_resnet18();
  dpt::data::InMemoryDataset data;
  dpt::Rng rng(8);
  for (int64_t i = 0; i < 12; ++i) {
    for (int64_t p = 0; p < 28 * 28; ++p) data.pixels.push_back(static_cast<uint8_t>(rng() % 256));
    data.labels.push_back(static_cast<int64_t>(rng() % 10));
  }
  dpt::parallel::DataParallel dp(std::move(net), {dpt::Device::cpu(0), dpt::Device::cpu(1)}, "ring", 2);
  const std::vector<float> before = dp.replica(1).parameters()[0].to_vector();
  dp.eval();
  const int64_t folded = dp.count_correct(data, 6);
  dp.set_fold_batch_norm(false);
  const int64_t unfolded = dp.count_correct(data, 6);
  EXPECT_EQ(folded, unfolded);
  EXPECT_EQ(dp.replica(1).parameters()[0].to_vector(), before);
}

}  // namespace
