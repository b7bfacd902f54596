// Dropout (nn/layers.h): its mask is a pure function of (seed, step, the example's row in
// the global batch, the value's index), so a network with Dropout trained in deterministic
// mode gives the same bits on 1 and 3 devices and on any sharding of the batch; the mask's
// statistics, its gradient, eval mode, and a bad p.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dpt/autograd/engine.h"
#include "dpt/data/in_memory.h"
#include "dpt/data/loader.h"
#include "dpt/nn/init.h"
#include "dpt/nn/layers.h"
#include "dpt/ops/ops.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "test_support.h"

namespace {

using dpt::Tensor;
using dpt::testing_support::error_of;
using dpt::testing_support::random_tensor;
namespace nn = dpt::nn;

TEST(Dropout, ZeroesAboutPAndScalesTheRestInTraining) {
  nn::Dropout dropout(0.3f, 5);
  const Tensor x = Tensor::full({100, 1000}, 2.0f);
  const std::vector<float> y = dropout(x).to_vector();
  int64_t zeros = 0;
  for (const float v : y) {
    if (v == 0.0f) ++zeros;
    else ASSERT_FLOAT_EQ(v, 2.0f / 0.7f);
  }
  EXPECT_NEAR(static_cast<double>(zeros) / static_cast<double>(y.size()), 0.3, 0.01);
}

TEST(Dropout, IsTheIdentityInEvalModeAndForPZero) {
  const Tensor x = random_tensor({4, 6}, 1);
  nn::Dropout dropout(0.5f);
  dropout.eval();
  EXPECT_EQ(dropout(x).to_vector(), x.to_vector());
  nn::Dropout none(0.0f);
  EXPECT_EQ(none(x).to_vector(), x.to_vector());
}

TEST(Dropout, ItsGradientIsItsMask) {
  nn::Dropout dropout(0.5f, 9);
  dropout.set_step_context({7, 3});
  Tensor x = random_tensor({5, 8}, 2);
  x.set_requires_grad(true);
  dpt::autograd::backward(dpt::ops::cross_entropy(dropout(x), Tensor::from_labels({0, 1, 2, 3, 4}),
                                                  dpt::ops::Reduction::sum));
  // d loss / d x = mask * d loss / d y: zero exactly where the mask is.
  const std::vector<float> mask = dropout.mask(7, 3, 5, 8).to_vector();
  const std::vector<float> grad = x.grad().to_vector();
  for (size_t i = 0; i < mask.size(); ++i) EXPECT_EQ(mask[i] == 0.0f, grad[i] == 0.0f) << "value " << i;
}

TEST(Dropout, TheMaskIsAPureFunctionOfSeedStepAndRow) {
  const nn::Dropout a(0.5f, 1), b(0.5f, 2);
  EXPECT_EQ(a.mask(3, 10, 4, 16).to_vector(), a.mask(3, 10, 4, 16).to_vector());
  EXPECT_NE(a.mask(3, 10, 4, 16).to_vector(), a.mask(4, 10, 4, 16).to_vector()) << "another step";
  EXPECT_NE(a.mask(3, 10, 4, 16).to_vector(), b.mask(3, 10, 4, 16).to_vector()) << "another seed";
  // Rows 12..13 of a shard starting at row 12 are rows 2..3 of one starting at row 10.
  const std::vector<float> whole = a.mask(3, 10, 4, 16).to_vector();
  const std::vector<float> part = a.mask(3, 12, 2, 16).to_vector();
  EXPECT_EQ(part, std::vector<float>(whole.begin() + 32, whole.end()));
}

TEST(Dropout, ABadProbabilityIsRefused) {
  EXPECT_EQ(error_of<std::invalid_argument>([] { nn::Dropout(1.0f); }),
            "Dropout: p must be in [0, 1), got 1.000000 (the probability of zeroing a value; 0.5 is usual)");
}

// A sharded loader names each shard's place in the global batch.
TEST(Dropout, ASharedLoaderGivesEachShardItsFirstRowAndTheBatchNumber) {
  dpt::data::InMemoryDataset data;
  data.pixels.assign(50 * 28 * 28, 0);
  data.labels.assign(50, 0);
  dpt::data::BatchLoader loader(data, 16, true, 0);
  loader.set_shard(2, 3);
  loader.seek(1, 1);
  dpt::data::Batch batch;
  ASSERT_TRUE(loader.next(batch));
  EXPECT_EQ(batch.first_row, dpt::data::shard_rows(16, 3, 2).begin);
  EXPECT_EQ(batch.number, 1 * loader.num_batches() + 1);
}

std::unique_ptr<nn::Module> net_with_dropout() {
  auto net = std::make_unique<nn::Sequential>();
  net->add<nn::Flatten>("flatten");
  net->add<nn::Linear>("fc1", 28 * 28, 32);
  net->add<nn::ReLU>("relu");
  net->add<nn::Dropout>("dropout", 0.5f, 11);
  net->add<nn::Linear>("fc2", 32, 10);
  nn::init_weights(*net, nn::Init::kaiming, 4);
  return net;
}

// Three steps from a loader's batches (the engine takes each batch's number and rows).
std::vector<std::vector<float>> train(int devices, int64_t chunk) {
  dpt::data::InMemoryDataset data;
  dpt::Rng rng(3);
  for (int64_t i = 0; i < 72 * 28 * 28; ++i) data.pixels.push_back(static_cast<uint8_t>(rng() % 256));
  for (int64_t i = 0; i < 72; ++i) data.labels.push_back(static_cast<int64_t>(rng() % 10));
  dpt::parallel::DataParallelOptions options;
  options.cores = devices;
  options.deterministic_chunk = chunk;
  dpt::parallel::DataParallel net(net_with_dropout(), dpt::parallel::cpu_devices(devices), options);
  dpt::optim::SGD sgd(net.replica_parameters(), {0.1f, 0.0f, 0.0f});
  dpt::data::BatchLoader loader(data, 24, true, 1);
  dpt::data::Batch batch;
  while (loader.next(batch)) {
    sgd.zero_grad();
    net.forward_backward(batch);
    sgd.step();
  }
  const std::vector<std::vector<Tensor>> replicas = net.replica_parameters();
  std::vector<std::vector<float>> values;
  for (const Tensor& p : replicas[0]) values.push_back(p.to_vector());
  return values;
}

TEST(Dropout, ANetworkWithDropoutGivesTheSameBitsOnOneAndThreeDevices) {
  const std::vector<std::vector<float>> one = train(1, 4);
  EXPECT_EQ(one, train(3, 4)) << "deterministic mode: 3 devices must give 1 device's bits";
  // Without deterministic mode the sums differ in rounding only: the masks are the same.
  const std::vector<std::vector<float>> plain_one = train(1, 0), plain_three = train(3, 0);
  for (size_t i = 0; i < plain_one.size(); ++i) {
    for (size_t j = 0; j < plain_one[i].size(); ++j) ASSERT_NEAR(plain_one[i][j], plain_three[i][j], 1e-5);
  }
}

}  // namespace
