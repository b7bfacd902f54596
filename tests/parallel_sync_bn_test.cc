// Synchronized BatchNorm (DataParallelOptions::sync_bn): on N devices the BatchNorm
// statistics, and the sums their gradient needs, are those of the whole global batch, so
// the gradients, running statistics and updates equal those of one device holding the
// batch (within float rounding), while plain per-device BatchNorm differs from it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "dpt/data/in_memory.h"
#include "dpt/core/config_error.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "test_support.h"

using namespace dpt;
using dpt::testing_support::error_of;
using dpt::testing_support::random_images;
using dpt::testing_support::small_bn_net;
using testing::HasSubstr;

namespace {

std::unique_ptr<parallel::DataParallel> net_on(int devices, bool sync_bn) {
  parallel::DataParallelOptions options;
  options.sync_bn = sync_bn;
  options.cores = devices;  // one thread per device: no OpenMP team (TSan cannot see into libgomp)
  return std::make_unique<parallel::DataParallel>(small_bn_net(), parallel::cpu_devices(devices), options);
}

float max_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<float> x = a[i].to_vector(), y = b[i].to_vector();
    for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, std::abs(x[k] - y[k]));
  }
  return worst;
}

std::vector<Tensor> gradients(const nn::Module& m) {
  std::vector<Tensor> grads;
  for (const Tensor& p : m.parameters()) grads.push_back(p.grad());
  return grads;
}

}  // namespace

TEST(SyncBatchNorm, GradientsAndStatisticsEqualOneDeviceHoldingTheBatch) {
  const auto [X, y] = random_images(30, 21, 12);
  auto one = net_on(1, false);
  one->forward_backward(X, y);
  for (int devices : {2, 3}) {
    auto synced = net_on(devices, true);
    synced->forward_backward(X, y);  // 15/15 and 10/10/10 examples per device
    for (int r = 0; r < devices; ++r) {
      EXPECT_LE(max_difference(gradients(synced->replica(r)), gradients(one->replica(0))), 2e-6f)
          << devices << " devices, replica " << r;
      EXPECT_LE(max_difference(synced->replica(r).buffers(), one->replica(0).buffers()), 1e-6f)
          << devices << " devices, replica " << r;
    }
  }
  // Without it each device normalizes with its own shard's statistics: visibly different.
  auto plain = net_on(2, false);
  plain->forward_backward(X, y);
  EXPECT_GT(max_difference(gradients(plain->replica(0)), gradients(one->replica(0))), 1e-4f);
  // (Their running means agree, shards of equal size averaging to the batch's mean; the
  // variances by the spread between the shards' means, here about 1e-5.)
}

TEST(SyncBatchNorm, TrainingStepsFollowOneDevice) {
  auto one = net_on(1, false);
  auto synced = net_on(2, true);
  optim::SGD sgd_one(one->replica_parameters(), {0.1f, 0.9f, 0.0f});
  optim::SGD sgd_two(synced->replica_parameters(), {0.1f, 0.9f, 0.0f});
  for (uint64_t step = 0; step < 4; ++step) {
    const auto [X, y] = random_images(33, 40 + step, 12);  // uneven: 17/16
    const parallel::StepResult a = one->forward_backward(X, y);
    const parallel::StepResult b = synced->forward_backward(X, y);
    EXPECT_NEAR(b.loss_sum, a.loss_sum, 1e-4 * std::abs(a.loss_sum));
    sgd_one.step();
    sgd_two.step();
  }
  EXPECT_LE(max_difference(synced->replica(1).parameters(), one->replica(0).parameters()), 1e-5f);
  EXPECT_LE(max_difference(synced->replica(1).buffers(), one->replica(0).buffers()), 1e-5f);
  // Evaluation uses the running statistics, no collectives: the same predictions.
  data::InMemoryDataset test;
  test.rows = test.cols = 12;
  for (int i = 0; i < 20 * 144; ++i) test.pixels.push_back(static_cast<uint8_t>((i * 37 + i / 144) % 256));
  for (int i = 0; i < 20; ++i) test.labels.push_back(i % 10);
  synced->eval();
  one->eval();
  EXPECT_EQ(synced->count_correct(test, 20), one->count_correct(test, 20));
}

TEST(SyncBatchNorm, RefusesABatchThatLeavesADeviceIdle) {
  auto synced = net_on(3, true);
  const auto [X, y] = random_images(2, 1, 12);
  EXPECT_THAT(error_of<ConfigError>([&] { synced->forward_backward(X, y); }),
              HasSubstr("`sync_bn` needs examples on every one of the 3 devices in every batch, but a batch of 2"));
}

TEST(SyncBatchNorm, RefusesDeterministicModeAndBuckets) {
  parallel::DataParallelOptions options;
  options.sync_bn = true;
  options.deterministic_chunk = 8;
  EXPECT_THAT(error_of<ConfigError>(
                  [&] { parallel::DataParallel(small_bn_net(), parallel::cpu_devices(2), options); }),
              HasSubstr("`sync_bn` and `deterministic` exclude each other"));
  options.deterministic_chunk = 0;
  options.bucket_mb = 1;
  EXPECT_THAT(error_of<ConfigError>(
                  [&] { parallel::DataParallel(small_bn_net(), parallel::cpu_devices(2), options); }),
              HasSubstr("leave `bucket_mb` at 0"));
}
