// Losses as a parameter of the step (nn/loss.h, ops::cross_entropy's label smoothing,
// ops::mse_loss): values against written-out double-precision formulas (torch's
// definitions), the shape contract's message, make_loss's refusals, and a DataParallel
// given a loss giving the same bits on 1 and 3 devices in deterministic mode. Gradients
// against finite differences are in ops_gradcheck_test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dpt/autograd/engine.h"
#include "dpt/data/fashion_mnist.h"
#include "dpt/nn/init.h"
#include "dpt/nn/models.h"
#include "dpt/nn/loss.h"
#include "dpt/ops/ops.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "test_support.h"

namespace {

using dpt::Tensor;
using dpt::testing_support::error_of;
namespace nn = dpt::nn;
namespace ops = dpt::ops;

Tensor random_logits(int64_t n, int64_t k, uint64_t seed, float scale = 3.0f) {
  return dpt::testing_support::random_tensor({n, k}, seed, -scale, scale);
}

// -sum_j target_ij log softmax(z_i)_j, target = (1 - s) onehot(y_i) + s / K, in double.
std::vector<double> smoothed_cross_entropy(const Tensor& logits, const std::vector<int64_t>& y, double s) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  const float* z = logits.data<float>();
  std::vector<double> losses;
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(z[i * k + j]));
    double loss = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      const double target = (j == y[i] ? 1.0 - s : 0.0) + s / static_cast<double>(k);
      loss -= target * (z[i * k + j] - std::log(sum));
    }
    losses.push_back(loss);
  }
  return losses;
}

TEST(Losses, LabelSmoothingMatchesTheWrittenOutFormula) {
  const std::vector<int64_t> y{0, 9, 3, 3, 7, 1};
  const Tensor logits = random_logits(6, 10, 1);
  for (const float s : {0.0f, 0.1f, 0.45f}) {
    const std::vector<double> expected = smoothed_cross_entropy(logits, y, s);
    const std::vector<float> got = ops::cross_entropy(logits, Tensor::from_labels(y), ops::Reduction::none, s).to_vector();
    ASSERT_EQ(got.size(), expected.size());
    double total = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], expected[i], 1e-5) << "smoothing " << s << ", example " << i;
      total += expected[i];
    }
    EXPECT_NEAR(nn::CrossEntropyLoss(s).sum(logits, Tensor::from_labels(y)).item(), total, 1e-4) << "smoothing " << s;
  }
}

TEST(Losses, NoSmoothingIsThePlainCrossEntropyBitForBit) {
  const Tensor logits = random_logits(5, 10, 2);
  const Tensor labels = Tensor::from_labels({4, 2, 0, 9, 9});
  const float plain = ops::cross_entropy(logits, labels, ops::Reduction::sum).item();
  const float loss = nn::CrossEntropyLoss().sum(logits, labels).item();
  EXPECT_EQ(std::memcmp(&plain, &loss, sizeof(float)), 0);
}

TEST(Losses, MseMatchesTorchsMeanOverEveryElement) {
  const Tensor x = random_logits(4, 10, 3, 1.0f);
  const std::vector<int64_t> y{2, 0, 9, 5};
  double expected = 0.0;  // torch.nn.MSELoss()(x, one_hot(y)) * 4: the per-example means summed
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 10; ++j) {
      const double d = x.data<float>()[i * 10 + j] - (j == y[i] ? 1.0 : 0.0);
      expected += d * d / 10.0;
    }
  }
  EXPECT_NEAR(nn::MSELoss().sum(x, Tensor::from_labels(y)).item(), expected, 1e-5);
  Tensor targets = Tensor::zeros({4, 10});
  for (int64_t i = 0; i < 4; ++i) targets.data<float>()[i * 10 + y[i]] = 1.0f;
  EXPECT_NEAR(ops::mse_loss(x, targets, ops::Reduction::mean).item(), expected / 4.0, 1e-6);
}

TEST(Losses, OutputsThatDoNotMatchTheLabelsAreRefusedNamingTheFix) {
  const Tensor labels = Tensor::from_labels({1, 2, 3});
  EXPECT_EQ(error_of<std::invalid_argument>([&] { nn::CrossEntropyLoss().sum(random_logits(4, 10, 4), labels); }),
            "cross-entropy loss: outputs [4, 10] and labels [3] do not match: it needs outputs [n, classes] and one "
            "label per row [n]; flatten the network's output or give it one label per example");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { nn::MSELoss().sum(Tensor::zeros({3, 10, 1, 1}), labels); }),
            "mse loss: outputs [3, 10, 1, 1] and labels [3] do not match: it needs outputs [n, classes] and one label "
            "per row [n]; flatten the network's output or give it one label per example");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { nn::MSELoss().sum(random_logits(3, 10, 5), Tensor::from_labels({1, 12, 3})); }),
            "cross_entropy: label 12 at index 1 is outside [0, 10)");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { ops::mse_loss(Tensor::zeros({2, 3}), Tensor::zeros({3, 2})); }),
            "mse_loss: input [2, 3] and targets [3, 2] differ in shape (one target per output)");
}

TEST(Losses, MakeLossNamesTheChoicesAndTheFix) {
  EXPECT_EQ(nn::make_loss({})->name(), "cross-entropy");
  EXPECT_EQ(nn::make_loss({"cross-entropy", 0.1f})->name(), "cross-entropy (label smoothing 0.10)");
  EXPECT_EQ(nn::make_loss({"mse", 0.0f})->name(), "mse");
  EXPECT_EQ(error_of<std::invalid_argument>([] { nn::make_loss({"hinge", 0.0f}); }),
            "`loss` must be cross-entropy or mse, got 'hinge'");
  EXPECT_EQ(error_of<std::invalid_argument>([] { nn::make_loss({"mse", 0.1f}); }),
            "label smoothing is for the cross-entropy loss, not mse; drop it or use cross-entropy");
  EXPECT_EQ(error_of<std::invalid_argument>([] { nn::make_loss({"cross-entropy", 1.0f}); }),
            "cross-entropy loss: label smoothing 1.000000 is outside [0, 1); 0 turns it off, 0.1 is usual");
}

// The engine sums the loss it is given on every shard: in deterministic mode 1 and 3
// devices end with the same bits, and both with the parameters of the plain module
// stepped on the gradient of that loss's mean over the batch.
constexpr int64_t kBatch = 24;
constexpr float kLr = 0.1f;

std::unique_ptr<nn::Module> small_lenet() {
  auto net = nn::lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  nn::init_weights(*net, nn::Init::kaiming, 3);
  return net;
}

std::vector<std::vector<float>> values_of(const std::vector<Tensor>& tensors) {
  std::vector<std::vector<float>> values;
  for (const Tensor& t : tensors) values.push_back(t.to_vector());
  return values;
}

std::vector<std::vector<float>> train_parallel(std::shared_ptr<const nn::Loss> loss, int devices) {
  dpt::parallel::DataParallelOptions options;
  options.cores = devices;
  options.deterministic_chunk = 4;
  options.loss = std::move(loss);
  dpt::parallel::DataParallel net(small_lenet(), dpt::parallel::cpu_devices(devices), options);
  dpt::optim::SGD sgd(net.replica_parameters(), {kLr, 0.0f, 0.0f});
  for (int step = 0; step < 2; ++step) {
    auto [X, y] = dpt::testing_support::random_images(kBatch, 7 + step);
    sgd.zero_grad();
    net.forward_backward(X, y);
    sgd.step();
  }
  return values_of(net.replica_parameters()[0]);
}

std::vector<std::vector<float>> train_plain(const nn::Loss& loss) {
  const std::unique_ptr<nn::Module> net = small_lenet();
  for (int step = 0; step < 2; ++step) {
    auto [X, y] = dpt::testing_support::random_images(kBatch, 7 + step);
    net->zero_grad();
    dpt::autograd::backward(loss.sum((*net)(X), y));
    for (const Tensor& p : net->parameters()) {  // sgd on the mean: the summed gradient / B
      float* w = p.data<float>();
      const float* g = p.grad().data<float>();
      for (int64_t i = 0; i < p.numel(); ++i) w[i] -= kLr * (g[i] / static_cast<float>(kBatch));
    }
  }
  return values_of(net->parameters());
}

void expect_near(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    for (size_t j = 0; j < a[i].size(); ++j) ASSERT_NEAR(a[i][j], b[i][j], 1e-5) << "tensor " << i << ", value " << j;
  }
}

TEST(Losses, TheEngineSumsTheLossItIsGivenTheSameBitsOnOneAndThreeDevices) {
  const auto mse = std::make_shared<const nn::MSELoss>();
  const auto smoothed = std::make_shared<const nn::CrossEntropyLoss>(0.2f);
  for (const std::shared_ptr<const nn::Loss>& loss : std::vector<std::shared_ptr<const nn::Loss>>{mse, smoothed}) {
    SCOPED_TRACE(loss->name());
    const std::vector<std::vector<float>> one = train_parallel(loss, 1);
    EXPECT_EQ(one, train_parallel(loss, 3)) << "3 devices differ from 1 in deterministic mode";
    expect_near(one, train_plain(*loss));
    EXPECT_NE(one, train_parallel(nullptr, 1)) << "the loss given made no difference";
  }
}

}  // namespace
