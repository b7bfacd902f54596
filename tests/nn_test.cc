// The concise API's building blocks (src/dpt/nn, src/dpt/optim/optimizer): Module's
// parameter / buffer bookkeeping, deep clone() and train/eval mode; lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses) against
// the from-scratch lenet(); init_weights' distributions; optim::SGD against updates worked
// out by hand; and BatchNorm2d's train/eval semantics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dpt/data/idx_dataset.h"
#include "dpt/autograd/engine.h"
#include "dpt/autograd/node.h"
#include "dpt/core/tensor.h"
#include "dpt/nn/init.h"
#include "dpt/nn/layers.h"
#include "dpt/nn/lenet.h"
#include "dpt/nn/models.h"
#include "dpt/nn/module.h"
#include "dpt/ops/ops.h"
#include "dpt/optim/optimizer.h"
#include "test_support.h"

using dpt::Shape;
using dpt::Tensor;
using dpt::testing_support::random_tensor;
namespace nn = dpt::nn;
namespace optim = dpt::optim;

namespace {

std::vector<std::string> names_of(const nn::Module& m) {
  std::vector<std::string> names;
  for (const auto& [name, t] : m.named_parameters()) names.push_back(name);
  return names;
}

int64_t total_numel(const std::vector<Tensor>& tensors) {
  int64_t n = 0;
  for (const Tensor& t : tensors) n += t.numel();
  return n;
}

// Sample mean and (population) standard deviation of a tensor's values, in double.
std::pair<double, double> mean_std(const Tensor& t) {
  const std::vector<float> v = t.to_vector();
  double sum = 0, sum_sq = 0;
  for (float x : v) sum += x;
  const double mean = sum / static_cast<double>(v.size());
  for (float x : v) sum_sq += (x - mean) * (x - mean);
  return {mean, std::sqrt(sum_sq / static_cast<double>(v.size()))};
}

void set_grad(const Tensor& p, const std::vector<float>& g) {
  p.set_grad(Tensor::from_vector(g, p.shape()));
}

void expect_floats_near(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// ---------------------------------------------------------------------------------------
// Module bookkeeping.

TEST(Module, LenetModuleParametersInRegistrationOrder) {
  auto net = nn::lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  EXPECT_EQ(names_of(*net), (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                                      "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  const std::vector<Tensor> params = net->parameters();
  ASSERT_EQ(params.size(), 8u);
  const std::vector<Shape> shapes{{20, 1, 3, 3}, {20}, {50, 20, 5, 5}, {50}, {128, 800}, {128}, {10, 128}, {10}};
  const auto named = net->named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].shape(), shapes[i]) << named[i].first;
    EXPECT_TRUE(params[i].requires_grad()) << named[i].first;
    // parameters() hands out the module's own tensors (what the optimizer must update).
    EXPECT_EQ(params[i].impl(), named[i].second.impl());
  }
  // 180 + 20 + 25000 + 50 + 102400 + 128 + 1280 + 10
  EXPECT_EQ(total_numel(params), 129068);
  EXPECT_TRUE(net->buffers().empty());
  // Biases start at zero, weights at the lesson's N(0, 0.01^2).
  for (size_t i = 1; i < params.size(); i += 2) {
    for (float v : params[i].to_vector()) ASSERT_EQ(v, 0.0f);
  }
  EXPECT_NEAR(mean_std(params[4]).second, 0.01, 0.0005);
}

// The parameter count of resnet18(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses), worked out from the architecture (every conv
// with a bias, as PyTorch's nn.Conv2d default; BatchNorm: weight and bias per channel).
int64_t conv_params(int64_t in, int64_t out, int64_t k) { return out * in * k * k + out; }
int64_t bn_params(int64_t c) { return 2 * c; }
int64_t residual_params(int64_t in, int64_t out, bool projection) {
  return conv_params(in, out, 3) + bn_params(out) + conv_params(out, out, 3) + bn_params(out) +
         (projection ? conv_params(in, out, 1) : 0);
}

TEST(Module, Resnet18ParameterAndBufferCounts) {
  auto net = nn::resnet18(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  const std::vector<Tensor> params = net->parameters();
  // Tensors: stem conv (2) + bn (2); 8 blocks of 8 (conv1, bn1, conv2, bn2 with 2 each), 3 of
  // them with a projection conv (2 more); fc (2).
  EXPECT_EQ(params.size(), 4u + 8u * 8u + 3u * 2u + 2u);  // 76

  // By hand: stem 640 + 128; stage1 2 x (36928 + 128 + 36928 + 128) = 148224;
  // stage2 230272 + 295680 = 525952; stage3 919296 + 1181184 = 2100480;
  // stage4 3673600 + 4721664 = 8395264; fc 5130. Total 11,175,818.
  const int64_t expected = conv_params(1, 64, 3) + bn_params(64) +                               //
                           2 * residual_params(64, 64, false) +                                  //
                           residual_params(64, 128, true) + residual_params(128, 128, false) +   //
                           residual_params(128, 256, true) + residual_params(256, 256, false) +  //
                           residual_params(256, 512, true) + residual_params(512, 512, false) +  //
                           512 * 10 + 10;
  EXPECT_EQ(expected, 11175818);
  EXPECT_EQ(total_numel(params), expected);

  const auto named = net->named_parameters();
  EXPECT_EQ(named.front().first, "conv.weight");
  EXPECT_EQ(named[2].first, "bn.weight");
  EXPECT_EQ(named[4].first, "stage1.block0.conv1.weight");
  EXPECT_EQ(named.back().first, "fc.bias");
  EXPECT_TRUE(
      std::any_of(named.begin(), named.end(), [](const auto& e) { return e.first == "stage2.block0.conv3.weight"; }));
  EXPECT_FALSE(
      std::any_of(named.begin(), named.end(), [](const auto& e) { return e.first == "stage1.block0.conv3.weight"; }));

  // Buffers: running_mean and running_var of each of the 17 BatchNorms (stem + 2 per block).
  const std::vector<Tensor> buffers = net->buffers();
  ASSERT_EQ(buffers.size(), 2u * 17u);
  int64_t buffer_numel = 0;
  for (size_t i = 0; i < buffers.size(); i += 2) {
    EXPECT_EQ(buffers[i].shape(), buffers[i + 1].shape());
    for (float v : buffers[i].to_vector()) ASSERT_EQ(v, 0.0f);      // running_mean
    for (float v : buffers[i + 1].to_vector()) ASSERT_EQ(v, 1.0f);  // running_var
    EXPECT_FALSE(buffers[i].requires_grad());
    buffer_numel += buffers[i].numel();
  }
  // Channels of the BatchNorms: 64 + 4 * 64 + 4 * 128 + 4 * 256 + 4 * 512 = 3904.
  EXPECT_EQ(buffer_numel, 3904);
}

TEST(Module, CloneIsDeep) {
  auto net = nn::resnet18(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  net->eval();
  // Give the buffers non-default values, so that copying them is seen.
  net->buffers()[0].copy_from(random_tensor(net->buffers()[0].shape(), 3));
  const std::unique_ptr<nn::Module> copy = net->clone();
  EXPECT_FALSE(copy->is_training()) << "clone() must keep the mode";

  const auto original_named = net->named_parameters();
  const auto copy_named = copy->named_parameters();
  ASSERT_EQ(copy_named.size(), original_named.size());
  for (size_t i = 0; i < original_named.size(); ++i) {
    const Tensor& a = original_named[i].second;
    const Tensor& b = copy_named[i].second;
    EXPECT_EQ(copy_named[i].first, original_named[i].first);
    EXPECT_EQ(a.shape(), b.shape());
    EXPECT_TRUE(b.requires_grad());
    EXPECT_EQ(std::memcmp(a.data<float>(), b.data<float>(), a.bytes()), 0) << original_named[i].first;
    EXPECT_NE(&a.storage(), &b.storage()) << original_named[i].first << " shares storage";
  }
  const std::vector<Tensor> original_buffers = net->buffers(), copy_buffers = copy->buffers();
  ASSERT_EQ(copy_buffers.size(), original_buffers.size());
  for (size_t i = 0; i < original_buffers.size(); ++i) {
    EXPECT_EQ(copy_buffers[i].to_vector(), original_buffers[i].to_vector());
    EXPECT_NE(&copy_buffers[i].storage(), &original_buffers[i].storage());
  }

  // Writing into the clone leaves the original alone, and the other way round.
  const Tensor first = net->parameters()[0];
  const std::vector<float> before = first.to_vector();
  copy->parameters()[0].copy_from(Tensor::full(first.shape(), 7.0f));
  copy->buffers()[1].copy_from(Tensor::full(copy->buffers()[1].shape(), 5.0f));
  EXPECT_EQ(first.to_vector(), before);
  EXPECT_EQ(net->buffers()[1].to_vector(), std::vector<float>(64, 1.0f));
  net->parameters().back().copy_from(Tensor::full({10}, -3.0f));
  EXPECT_EQ(copy->parameters().back().to_vector(), std::vector<float>(10, 0.0f));
  // Switching the mode of one does not switch the other.
  copy->train();
  EXPECT_FALSE(net->is_training());
}

TEST(Module, TrainAndEvalReachEveryDescendant) {
  nn::Sequential outer;
  auto inner = std::make_unique<nn::Sequential>();
  auto bn = std::make_unique<nn::BatchNorm2d>(3);
  auto residual = std::make_unique<nn::Residual>(3, 3);
  nn::Sequential* inner_ptr = inner.get();
  nn::BatchNorm2d* bn_ptr = bn.get();
  nn::Residual* residual_ptr = residual.get();
  inner->add("bn", std::move(bn)).add("res", std::move(residual));
  outer.add<nn::Conv2d>("conv", 1, 3, 3).add("inner", std::move(inner));
  EXPECT_TRUE(outer.is_training() && inner_ptr->is_training() && bn_ptr->is_training());
  outer.eval();
  EXPECT_FALSE(outer.is_training());
  EXPECT_FALSE(inner_ptr->is_training());
  EXPECT_FALSE(bn_ptr->is_training());
  EXPECT_FALSE(residual_ptr->is_training());
  outer.train();
  EXPECT_TRUE(inner_ptr->is_training());
  EXPECT_TRUE(bn_ptr->is_training());
  EXPECT_TRUE(residual_ptr->is_training());
  outer.train(false);
  EXPECT_FALSE(bn_ptr->is_training());
  // The residual block's own BatchNorms are reached too: in eval mode a forward leaves all
  // running statistics alone.
  const std::vector<Tensor> buffers = outer.buffers();
  ASSERT_EQ(buffers.size(), 6u);  // bn, res.bn1, res.bn2
  std::vector<std::vector<float>> before;
  for (const Tensor& b : buffers) before.push_back(b.to_vector());
  (void)outer(random_tensor({2, 1, 6, 6}, 1));
  for (size_t i = 0; i < buffers.size(); ++i) EXPECT_EQ(buffers[i].to_vector(), before[i]) << "buffer " << i;
  outer.train();
  (void)outer(random_tensor({2, 1, 6, 6}, 1));
  for (size_t i = 0; i < buffers.size(); ++i) EXPECT_NE(buffers[i].to_vector(), before[i]) << "buffer " << i;
}

TEST(Module, ZeroGradDropsEveryGradient) {
  auto net = nn::lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  const Tensor loss =
      dpt::ops::cross_entropy((*net)(random_tensor({2, 1, 28, 28}, 4, 0, 1)), Tensor::from_labels({3, 7}));
  dpt::autograd::backward(loss);
  for (const Tensor& p : net->parameters()) ASSERT_TRUE(p.grad().defined()) << p.name();
  net->zero_grad();
  for (const Tensor& p : net->parameters()) EXPECT_FALSE(p.grad().defined()) << p.name();
}

// ---------------------------------------------------------------------------------------
// lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses) is the from-scratch lenet() as modules.

TEST(LenetModule, MatchesTheFromScratchLenetWithTheSameParameters) {
  const std::vector<Tensor> scratch_params = dpt::nn::lenet_params(/*seed=*/11, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  auto net = nn::lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  const std::vector<Tensor> module_params = net->parameters();
  ASSERT_EQ(module_params.size(), scratch_params.size());
  for (size_t i = 0; i < module_params.size(); ++i) {
    ASSERT_EQ(module_params[i].shape(), scratch_params[i].shape()) << "parameter " << i;
    module_params[i].copy_from(scratch_params[i]);
  }
  // Non-zero biases, so that a bias dropped or swapped with another shows.
  for (size_t i = 1; i < module_params.size(); i += 2) {
    const Tensor b = random_tensor(module_params[i].shape(), 100 + i, -0.1f, 0.1f);
    module_params[i].copy_from(b);
    scratch_params[i].copy_from(b);
  }
  const Tensor X = random_tensor({5, 1, 28, 28}, 12, 0.0f, 1.0f);
  const Tensor labels = Tensor::from_labels({0, 3, 9, 3, 5});
  const Tensor expected = nn::lenet(X, scratch_params);
  const Tensor got = (*net)(X);
  ASSERT_EQ(got.shape(), (Shape{5, 10}));
  // The same ops on the same inputs: the same bits.
  EXPECT_EQ(got.to_vector(), expected.to_vector());

  // And the same gradients.
  dpt::autograd::backward(dpt::ops::cross_entropy(expected, labels));
  dpt::autograd::backward(dpt::ops::cross_entropy(got, labels));
  for (size_t i = 0; i < module_params.size(); ++i) {
    ASSERT_TRUE(module_params[i].grad().defined());
    EXPECT_EQ(module_params[i].grad().to_vector(), scratch_params[i].grad().to_vector()) << "parameter " << i;
  }
}

// ---------------------------------------------------------------------------------------
// init_weights.

TEST(InitWeights, DistributionsFollowTheScheme) {
  // Linear(800, 128): fan_in 800, fan_out 128, 102,400 weights. The sample standard
  // deviation of n normal draws has a relative standard error of 1/sqrt(2n) = 0.22%, so 5%
  // is more than 20 standard errors: no false failure, while a wrong fan (e.g. fan_out: a
  // factor 2.5 in the std) is far outside.
  nn::Linear linear(800, 128);
  const Tensor weight = linear.parameters()[0];
  const Tensor bias = linear.parameters()[1];
  bias.copy_from(Tensor::full({128}, 0.25f));  // biases must be left as they are

  nn::init_weights(linear, nn::Init::lesson, 1);
  auto [mean, std] = mean_std(weight);
  EXPECT_NEAR(std, 0.01, 0.05 * 0.01);
  EXPECT_NEAR(mean, 0.0, 0.01 * 5 / std::sqrt(102400.0));  // 5 standard errors of the mean

  nn::init_weights(linear, nn::Init::kaiming, 1);
  std::tie(mean, std) = mean_std(weight);
  const double kaiming = std::sqrt(2.0 / 800.0);
  EXPECT_NEAR(std, kaiming, 0.05 * kaiming);
  EXPECT_NEAR(mean, 0.0, kaiming * 5 / std::sqrt(102400.0));

  nn::init_weights(linear, nn::Init::xavier, 1);
  const double bound = std::sqrt(6.0 / (800.0 + 128.0));
  const std::vector<float> values = weight.to_vector();
  float lo = values[0], hi = values[0];
  for (float v : values) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  // 102,400 uniform draws come within 0.1% of both ends, and U(-a, a) has std a / sqrt(3).
  EXPECT_LT(lo, -0.999 * bound);
  EXPECT_GT(hi, 0.999 * bound);
  std::tie(mean, std) = mean_std(weight);
  EXPECT_NEAR(std, bound / std::sqrt(3.0), 0.05 * bound / std::sqrt(3.0));

  EXPECT_EQ(bias.to_vector(), std::vector<float>(128, 0.25f));
}

TEST(InitWeights, ConvolutionFanInCountsTheKernel) {
  // Conv2d(20, 50, 5): fan_in = 20 * 5 * 5 = 500, 25,000 weights (std error 0.45%).
  nn::Conv2d conv(20, 50, 5);
  nn::init_weights(conv, nn::Init::kaiming, 3);
  const double expected = std::sqrt(2.0 / 500.0);
  EXPECT_NEAR(mean_std(conv.parameters()[0]).second, expected, 0.05 * expected);
  EXPECT_EQ(conv.parameters()[1].to_vector(), std::vector<float>(50, 0.0f));
}

TEST(InitWeights, SameSeedSameWeightsAndBatchNormLeftAlone) {
  auto a = nn::resnet18(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  auto b = nn::resnet18(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  nn::init_weights(*a, nn::Init::kaiming, 42);
  nn::init_weights(*b, nn::Init::kaiming, 42);
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i].second.to_vector(), pb[i].second.to_vector()) << pa[i].first;
  // BatchNorm scales stay 1 and shifts 0.
  for (const auto& [name, t] : pa) {
    if (name.find("bn") == std::string::npos) continue;
    const float want = name.ends_with(".weight") ? 1.0f : 0.0f;
    for (float v : t.to_vector()) ASSERT_EQ(v, want) << name;
  }
  // Another seed gives other weights.
  nn::init_weights(*b, nn::Init::kaiming, 43);
  EXPECT_NE(a->parameters()[0].to_vector(), b->parameters()[0].to_vector());
}

TEST(InitWeights, ParseInit) {
  EXPECT_EQ(nn::parse_init("lesson"), nn::Init::lesson);
  EXPECT_EQ(nn::parse_init("kaiming"), nn::Init::kaiming);
  EXPECT_EQ(nn::parse_init("xavier"), nn::Init::xavier);
  EXPECT_CONFIG_ERROR(nn::parse_init("he"), "init", "`init` must be lesson, kaiming or xavier, got 'he'");
  EXPECT_CONFIG_ERROR(nn::parse_init("Kaiming"), "init", "got 'Kaiming'");
  EXPECT_CONFIG_ERROR(nn::parse_init(""), "init", "got ''");
}

// ---------------------------------------------------------------------------------------
// optim::SGD against hand-computed updates.
//
// p0 = [1, -2, 0.5], lr 0.1, weight decay 0.01; gradients g1 = [0.5, 0.25, -1], then
// g2 = [-0.2, 0.1, 0.3].

TEST(SGD, MomentumAndWeightDecayMatchTheHandComputedSteps) {
  Tensor p = Tensor::from_vector({1.0f, -2.0f, 0.5f}, {3}).set_requires_grad(true);
  optim::SGD sgd(std::vector<Tensor>{p}, {/*lr=*/0.1f, /*momentum=*/0.9f, /*weight_decay=*/0.01f});
  EXPECT_FALSE(sgd.state(0, 0, 0).defined());

  // Step 1: d = g1 + 0.01 p0 = [0.5 + 0.01, 0.25 - 0.02, -1 + 0.005] = [0.51, 0.23, -0.995];
  // v = d (first step); p1 = p0 - 0.1 v = [0.949, -2.023, 0.5995].
  set_grad(p, {0.5f, 0.25f, -1.0f});
  sgd.step();
  expect_floats_near(sgd.state(0, 0, 0).to_vector(), {0.51, 0.23, -0.995}, 1e-6);
  expect_floats_near(p.to_vector(), {0.949, -2.023, 0.5995}, 1e-6);

  // Step 2: d = g2 + 0.01 p1 = [-0.2 + 0.00949, 0.1 - 0.02023, 0.3 + 0.005995]
  //           = [-0.19051, 0.07977, 0.305995];
  // v = 0.9 v + d = [0.459 - 0.19051, 0.207 + 0.07977, -0.8955 + 0.305995]
  //              = [0.26849, 0.28677, -0.589505];
  // p2 = p1 - 0.1 v = [0.949 - 0.026849, -2.023 - 0.028677, 0.5995 + 0.0589505]
  //                 = [0.922151, -2.051677, 0.6584505].
  set_grad(p, {-0.2f, 0.1f, 0.3f});
  sgd.step();
  expect_floats_near(sgd.state(0, 0, 0).to_vector(), {0.26849, 0.28677, -0.589505}, 1e-6);
  expect_floats_near(p.to_vector(), {0.922151, -2.051677, 0.6584505}, 1e-6);
  // step() leaves the gradient to zero_grad(), as PyTorch does.
  EXPECT_TRUE(p.grad().defined());
}

TEST(SGD, WithoutMomentumEachStepIsPlainGradientDescent) {
  Tensor p = Tensor::from_vector({1.0f, -2.0f, 0.5f}, {3}).set_requires_grad(true);
  optim::SGD sgd(std::vector<Tensor>{p}, {0.1f, 0.0f, 0.01f});
  // Step 1 as above: p1 = p0 - 0.1 (g1 + 0.01 p0) = [0.949, -2.023, 0.5995].
  set_grad(p, {0.5f, 0.25f, -1.0f});
  sgd.step();
  expect_floats_near(p.to_vector(), {0.949, -2.023, 0.5995}, 1e-6);
  // Step 2 with no memory of step 1: p2 = p1 - 0.1 (g2 + 0.01 p1)
  //   = [0.949 + 0.019051, -2.023 - 0.007977, 0.5995 - 0.0305995] = [0.968051, -2.030977, 0.5689005].
  set_grad(p, {-0.2f, 0.1f, 0.3f});
  sgd.step();
  expect_floats_near(p.to_vector(), {0.968051, -2.030977, 0.5689005}, 1e-6);
  EXPECT_FALSE(sgd.state(0, 0, 0).defined()) << "momentum 0 keeps no buffer";
}

TEST(SGD, SkipsParametersWithoutGradientAndStepsEveryReplicaAlike) {
  // Two replicas of two parameters; the second parameter has no gradient on either.
  std::vector<std::vector<Tensor>> replicas;
  for (int r = 0; r < 2; ++r) {
    replicas.push_back({Tensor::from_vector({1.0f, -2.0f, 0.5f}, {3}).set_requires_grad(true),
                        Tensor::from_vector({4.0f}, {1}).set_requires_grad(true)});
  }
  optim::SGD sgd(replicas, {0.1f, 0.9f, 0.01f});
  for (int step = 0; step < 2; ++step) {
    for (auto& replica : replicas)
      set_grad(replica[0], step == 0 ? std::vector<float>{0.5f, 0.25f, -1.0f} : std::vector<float>{-0.2f, 0.1f, 0.3f});
    sgd.step();
  }
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("replica " + std::to_string(r));
    expect_floats_near(replicas[r][0].to_vector(), {0.922151, -2.051677, 0.6584505}, 1e-6);
    // No gradient: no weight decay either, and no momentum buffer.
    EXPECT_EQ(replicas[r][1].to_vector(), std::vector<float>{4.0f});
    EXPECT_FALSE(sgd.state(0, r, 1).defined());
  }
  // Each replica keeps its own momentum buffer.
  EXPECT_NE(&sgd.state(0, 0, 0).storage(), &sgd.state(0, 1, 0).storage());
  EXPECT_EQ(replicas[0][0].to_vector(), replicas[1][0].to_vector());
}

TEST(SGD, RejectsBadOptionsWithAClearMessage) {
  const std::vector<Tensor> params{Tensor::zeros({2}).set_requires_grad(true)};
  EXPECT_INVALID_ARGUMENT(optim::SGD(params, {0.1f, 1.0f, 0.0f}), "momentum must be in [0, 1), got 1.000000");
  EXPECT_INVALID_ARGUMENT(optim::SGD(params, {0.1f, -0.1f, 0.0f}), "momentum must be in [0, 1), got -0.100000");
  EXPECT_INVALID_ARGUMENT(optim::SGD(params, {0.1f, NAN, 0.0f}), "momentum must be in [0, 1), got nan");
  EXPECT_INVALID_ARGUMENT(optim::SGD(params, {0.1f, 0.0f, -0.01f}),
                          "weight decay must be a finite number >= 0, got -0.010000");
  EXPECT_INVALID_ARGUMENT(optim::SGD(params, {0.1f, 0.0f, INFINITY}),
                          "weight decay must be a finite number >= 0, got inf");
  EXPECT_INVALID_ARGUMENT(optim::SGD(params, {-0.5f, 0.0f, 0.0f}),
                          "learning rate must be a finite number >= 0, got -0.500000");
  EXPECT_INVALID_ARGUMENT(optim::SGD(params, {NAN, 0.0f, 0.0f}), "learning rate must be a finite number >= 0");
  EXPECT_INVALID_ARGUMENT(optim::SGD(std::vector<std::vector<Tensor>>{params, {}}, {0.1f, 0.0f, 0.0f}),
                          "optimizer: the replicas hold different numbers of parameters");
  // The edges that are allowed.
  EXPECT_NO_THROW(optim::SGD(params, {0.0f, 0.0f, 0.0f}));
  EXPECT_NO_THROW(optim::SGD(params, {0.1f, 0.99f, 0.0f}));
}

TEST(SGD, ZeroGradClearsEveryReplica) {
  std::vector<std::vector<Tensor>> replicas(3);
  for (auto& replica : replicas) {
    replica = {Tensor::zeros({2}).set_requires_grad(true), Tensor::zeros({3}).set_requires_grad(true)};
    set_grad(replica[0], {1, 2});
    set_grad(replica[1], {1, 2, 3});
  }
  optim::SGD sgd(replicas, {0.1f, 0.5f, 0.0f});
  sgd.zero_grad();
  for (const auto& replica : replicas) {
    for (const Tensor& p : replica) EXPECT_FALSE(p.grad().defined());
  }
}

// ---------------------------------------------------------------------------------------
// BatchNorm2d: batch statistics while training, running statistics in eval mode.

// x [N, C, H, W] with channel c drawn from U(-1, 1) * (c + 1) + 3c: clearly different
// per-channel means and variances.
Tensor channel_shifted_input(int64_t n, int64_t c, int64_t hw, uint64_t seed) {
  Tensor x = random_tensor({n, c, hw, hw}, seed);
  float* d = x.data<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t k = 0; k < hw * hw; ++k) {
        float& v = d[(i * c + ch) * hw * hw + k];
        v = v * static_cast<float>(ch + 1) + 3.0f * static_cast<float>(ch);
      }
  return x;
}

// Per-channel mean and biased variance of x, in double.
void channel_stats(const Tensor& x, std::vector<double>& mean, std::vector<double>& var) {
  const int64_t n = x.dim(0), c = x.dim(1), hw = x.dim(2) * x.dim(3);
  const std::vector<float> v = x.to_vector();
  mean.assign(c, 0.0);
  var.assign(c, 0.0);
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < hw; ++k) mean[ch] += v[(i * c + ch) * hw + k];
    mean[ch] /= static_cast<double>(n * hw);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < hw; ++k) var[ch] += std::pow(v[(i * c + ch) * hw + k] - mean[ch], 2);
    var[ch] /= static_cast<double>(n * hw);
  }
}

TEST(BatchNorm2dModule, TrainUsesBatchStatisticsEvalUsesRunningStatistics) {
  constexpr int64_t N = 4, C = 3, HW = 5, count = N * HW * HW;
  nn::BatchNorm2d bn(C);
  const std::vector<Tensor> buffers = bn.buffers();
  ASSERT_EQ(buffers.size(), 2u);
  const Tensor running_mean = buffers[0], running_var = buffers[1];
  const Tensor x = channel_shifted_input(N, C, HW, 5);
  std::vector<double> mean, var;
  channel_stats(x, mean, var);

  // Train: normalized with this batch's statistics, so each channel of the output has mean
  // ~0 and variance var / (var + eps) ~ 1 (gamma 1, beta 0).
  ASSERT_TRUE(bn.is_training());
  const Tensor y = bn(x);
  std::vector<double> out_mean, out_var;
  channel_stats(y, out_mean, out_var);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_NEAR(out_mean[c], 0.0, 1e-5) << "channel " << c;
    EXPECT_NEAR(out_var[c], var[c] / (var[c] + 1e-5), 1e-4) << "channel " << c;
  }
  // Running stats, from 0 / 1 with momentum 0.1 and the unbiased variance.
  const double unbiased = static_cast<double>(count) / (count - 1);
  std::vector<double> rm(C), rv(C);
  for (int64_t c = 0; c < C; ++c) {
    rm[c] = 0.1 * mean[c];
    rv[c] = 0.9 + 0.1 * unbiased * var[c];
  }
  expect_floats_near(running_mean.to_vector(), rm, 1e-5);
  expect_floats_near(running_var.to_vector(), rv, 1e-5);

  // Eval: y = (x - running_mean) / sqrt(running_var + eps), and the running stats stay.
  bn.eval();
  const std::vector<float> rm_before = running_mean.to_vector(), rv_before = running_var.to_vector();
  const Tensor y_eval = bn(x);
  EXPECT_EQ(running_mean.to_vector(), rm_before);
  EXPECT_EQ(running_var.to_vector(), rv_before);
  const std::vector<float> xv = x.to_vector(), ye = y_eval.to_vector();
  for (int64_t i = 0; i < N; ++i)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < HW * HW; ++k) {
        const size_t at = static_cast<size_t>((i * C + c) * HW * HW + k);
        ASSERT_NEAR(ye[at], (xv[at] - rm_before[c]) / std::sqrt(rv_before[c] + 1e-5), 1e-5) << "at " << at;
      }
  // In eval mode an example's output does not depend on the rest of the batch.
  const Tensor one = Tensor::from_vector(std::vector<float>(xv.begin(), xv.begin() + C * HW * HW), {1, C, HW, HW});
  const std::vector<float> y_one = bn(one).to_vector();
  EXPECT_EQ(y_one, std::vector<float>(ye.begin(), ye.begin() + C * HW * HW));

  // Back to train: batch statistics again, and the running stats move on from where they were.
  bn.train();
  const Tensor x2 = channel_shifted_input(N, C, HW, 6);
  std::vector<double> mean2, var2;
  channel_stats(x2, mean2, var2);
  (void)bn(x2);
  for (int64_t c = 0; c < C; ++c) {
    rm[c] = 0.9 * rm[c] + 0.1 * mean2[c];
    rv[c] = 0.9 * rv[c] + 0.1 * unbiased * var2[c];
  }
  expect_floats_near(running_mean.to_vector(), rm, 1e-5);
  expect_floats_near(running_var.to_vector(), rv, 1e-5);
  // ... and eval again uses the updated running stats.
  bn.eval();
  const std::vector<float> y2 = bn(x2).to_vector(), x2v = x2.to_vector();
  const std::vector<float> rm2 = running_mean.to_vector(), rv2 = running_var.to_vector();
  for (int64_t c = 0; c < C; ++c) {
    const size_t at = static_cast<size_t>(c * HW * HW);  // first pixel of example 0, channel c
    EXPECT_NEAR(y2[at], (x2v[at] - rm2[c]) / std::sqrt(rv2[c] + 1e-5), 1e-5);
  }
}

TEST(BatchNorm2dModule, GradientsReachScaleAndShiftButNotTheBuffers) {
  nn::BatchNorm2d bn(2);
  const Tensor x = channel_shifted_input(3, 2, 4, 9).set_requires_grad(true);
  // A loss that is not invariant to the normalization: sum of the outputs weighted by a
  // cross-entropy over a flattened view.
  const Tensor logits = dpt::ops::reshape(bn(x), {3, 32});
  dpt::autograd::backward(dpt::ops::cross_entropy(logits, Tensor::from_labels({0, 5, 31})));
  const std::vector<Tensor> params = bn.parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_TRUE(params[0].grad().defined());
  EXPECT_TRUE(params[1].grad().defined());
  EXPECT_TRUE(x.grad().defined());
  for (const Tensor& b : bn.buffers()) EXPECT_FALSE(b.grad().defined());
}

}  // namespace
