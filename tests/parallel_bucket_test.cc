// Gradient bucketing with the allreduce overlapped with backward (src/dpt/parallel/
// gradient_bucketer, the grad-ready hook of src/dpt/autograd/engine): the hook reports each
// leaf once, with its final gradient; buckets follow the reverse parameter order; bucketed
// allreduce gives the unbucketed result (bit for bit on 2 ranks, where a sum of two floats
// has one order; within float rounding on 3, where the ring's chunks cut the buffer
// elsewhere) and some buckets really start while backward still runs; and DataParallel
// with --bucket-mb trains to the parameters it trains to without.
//
// Runs under ThreadSanitizer too (the label `parallel`): each device gets one core.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dpt/data/idx_dataset.h"
#include "dpt/autograd/engine.h"
#include "dpt/core/random.h"
#include "dpt/core/tensor.h"
#include "dpt/nn/init.h"
#include "dpt/nn/lenet.h"
#include "dpt/nn/models.h"
#include "dpt/ops/ops.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/allreduce.h"
#include "dpt/parallel/communicator.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/device_pool.h"
#include "dpt/parallel/gradient_bucketer.h"
#include "dpt/parallel/replicate.h"
#include "test_support.h"

using dpt::Tensor;
using dpt::parallel::assign_buckets;
using dpt::parallel::cpu_devices;
using dpt::parallel::GradientBucketer;
using dpt::testing_support::kThreadSanitizer;
namespace nn = dpt::nn;

namespace {
using dpt::testing_support::random_images;

// ---------------------------------------------------------------------------------------
// The grad-ready hook.

TEST(GradReadyHook, ReportsEveryLeafOnceWithItsFinalGradient) {
  // w is used twice (its gradient is a sum of two parts), b once, c by no path to the loss.
  Tensor w = Tensor::from_vector({1, 2, 3, 4}, {2, 2}).set_requires_grad(true);
  Tensor b = Tensor::from_vector({0.5f, -0.5f, 0.25f, 0}, {2, 2}).set_requires_grad(true);
  Tensor x = Tensor::from_vector({1, -1, 2, 0.5f}, {2, 2});
  const Tensor h = dpt::ops::matmul(x, w);
  const Tensor out = dpt::ops::matmul(h, w);
  const Tensor loss =
      dpt::ops::cross_entropy(dpt::ops::add(out, b), Tensor::from_labels({0, 1}), dpt::ops::Reduction::sum);
  std::map<const dpt::TensorImpl*, std::vector<float>> seen;
  std::map<const dpt::TensorImpl*, int> calls;
  {
    dpt::autograd::GradReadyHookGuard guard([&](const Tensor& leaf) {
      ++calls[leaf.impl()];
      seen[leaf.impl()] = leaf.grad().defined() ? leaf.grad().to_vector() : std::vector<float>{};
    });
    dpt::autograd::backward(loss);
  }
  EXPECT_EQ(calls[w.impl()], 1);
  EXPECT_EQ(calls[b.impl()], 1);
  EXPECT_EQ(calls.size(), 2u);
  // What the hook saw is what backward left: nothing was added afterwards.
  EXPECT_EQ(seen[w.impl()], w.grad().to_vector());
  EXPECT_EQ(seen[b.impl()], b.grad().to_vector());

  // Without a guard, backward reports nothing (and still works).
  w.zero_grad();
  const Tensor loss2 =
      dpt::ops::cross_entropy(dpt::ops::matmul(x, w), Tensor::from_labels({0, 1}), dpt::ops::Reduction::sum);
  dpt::autograd::backward(loss2);
  EXPECT_TRUE(w.grad().defined());
  EXPECT_EQ(calls[w.impl()], 1);
}

TEST(GradReadyHook, LenetReportsTheLastLayersFirst) {
  const std::vector<Tensor> params = nn::lenet_params(3, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  auto [X, y] = random_images(4, 1);
  std::vector<const dpt::TensorImpl*> order;
  {
    dpt::autograd::GradReadyHookGuard guard([&](const Tensor& leaf) { order.push_back(leaf.impl()); });
    dpt::autograd::backward(dpt::ops::cross_entropy(nn::lenet(X, params), y, dpt::ops::Reduction::sum));
  }
  ASSERT_EQ(order.size(), params.size());
  // The output layer's weight is ready before the first convolution's.
  auto position = [&](const Tensor& p) { return std::find(order.begin(), order.end(), p.impl()) - order.begin(); };
  EXPECT_LT(position(params.back()), position(params.front()));
  EXPECT_LT(position(params[params.size() - 2]), position(params[0]));
}

// ---------------------------------------------------------------------------------------
// Bucket assignment.

TEST(AssignBuckets, FillsFromTheLastParameterAndClosesABucketOnceFull) {
  const std::vector<Tensor> params = {Tensor::zeros({10}), Tensor::zeros({300}), Tensor::zeros({5}),
                                      Tensor::zeros({100})};
  // 400 bytes per bucket: [3] = 400 bytes, full; [2, 1] = 20 + 1200 bytes; [0].
  EXPECT_EQ(assign_buckets(params, 400), (std::vector<std::vector<size_t>>{{3}, {2, 1}, {0}}));
  EXPECT_EQ(assign_buckets(params, 0), (std::vector<std::vector<size_t>>{{3, 2, 1, 0}}));
  EXPECT_EQ(assign_buckets(params, 1), (std::vector<std::vector<size_t>>{{3}, {2}, {1}, {0}}));
  EXPECT_EQ(dpt::parallel::bucket_bytes_from_mb(0.5), 512u * 1024u);
  EXPECT_CONFIG_ERROR(dpt::parallel::bucket_bytes_from_mb(-1), "bucket_mb", "`bucket_mb` must be a number >= 0");
}

// ---------------------------------------------------------------------------------------
// Bucketed vs unbucketed allreduce of real LeNet gradients, N in-process ranks.

struct Gradients {
  std::vector<std::vector<std::vector<float>>> per_rank;  // [rank][param] values
  size_t launched_during_backward = 0;
  size_t buckets = 0;
};

Gradients lenet_gradients(int n, size_t bucket_bytes) {
  auto comm = dpt::parallel::make_in_process_communicator("ring", n);
  dpt::parallel::DevicePool pool(cpu_devices(n), n);
  pool.set_abort_hook([&] { comm->abort("a rank failed"); });
  std::vector<std::vector<Tensor>> params;
  for (int r = 0; r < n; ++r) params.push_back(dpt::parallel::replicate(nn::lenet_params(11, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses), dpt::Device::cpu(r)));
  std::vector<std::unique_ptr<GradientBucketer>> bucketers;
  if (bucket_bytes > 0) {
    for (int r = 0; r < n; ++r)
      bucketers.push_back(std::make_unique<GradientBucketer>(*comm, r, params[r], bucket_bytes));
  }
  std::vector<std::vector<float>> flat(n);
  const float scale = 1.0f / 24.0f;
  pool.run_all([&](int rank) {
    auto [X, y] = random_images(kThreadSanitizer ? 4 : 8, 100 + rank);  // each rank its own shard
    const auto backward = [&] {
      dpt::autograd::backward(dpt::ops::cross_entropy(nn::lenet(X, params[rank]), y, dpt::ops::Reduction::sum));
    };
    if (bucketers.empty()) {
      backward();
      dpt::parallel::allreduce_gradients(*comm, rank, params[rank], flat[rank], scale);
    } else {
      bucketers[rank]->backward_and_allreduce(backward, scale);
    }
  });
  Gradients result;
  if (!bucketers.empty()) {
    result.launched_during_backward = bucketers[0]->launched_during_backward();
    result.buckets = bucketers[0]->num_buckets();
  }
  for (int r = 0; r < n; ++r) {
    result.per_rank.emplace_back();
    for (const Tensor& p : params[r]) result.per_rank.back().push_back(p.grad().to_vector());
  }
  bucketers.clear();  // before the communicator goes
  return result;
}

class BucketedAllreduce : public ::testing::TestWithParam<int> {};

TEST_P(BucketedAllreduce, EqualsOneAllreduceAfterBackward) {
  const int n = GetParam();
  const Gradients plain = lenet_gradients(n, 0);
  // 64 KiB: LeNet's 0.4 MiB of gradients in several buckets (the 800x128 weight alone).
  const Gradients bucketed = lenet_gradients(n, 64 * 1024);
  EXPECT_GE(bucketed.buckets, 3u);
  // The overlap happened: the output layers' buckets left before backward was done.
  EXPECT_GE(bucketed.launched_during_backward, 1u);
  EXPECT_LT(bucketed.launched_during_backward, bucketed.buckets + 1);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(bucketed.per_rank[r].size(), plain.per_rank[r].size());
    for (size_t i = 0; i < plain.per_rank[r].size(); ++i) {
      const std::vector<float>& a = plain.per_rank[r][i];
      const std::vector<float>& b = bucketed.per_rank[r][i];
      ASSERT_EQ(a.size(), b.size());
      if (n == 2) {
        // x0 + x1 == x1 + x0 exactly: however the buffer is cut, the bits agree.
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "rank " << r << " param " << i;
      } else {
        // Three terms summed in another association: a few ulps of the terms' magnitude.
        size_t bad = 0;
        for (size_t k = 0; k < a.size(); ++k) bad += std::fabs(a[k] - b[k]) > 1e-6f * (std::fabs(a[k]) + 1e-3f);
        EXPECT_EQ(bad, 0u) << "rank " << r << " param " << i;
      }
      // Every rank holds the same reduced gradient (the ring's all-gather copies bits).
      EXPECT_EQ(b, bucketed.per_rank[0][i]) << "rank " << r << " param " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, BucketedAllreduce, ::testing::Values(2, 3));

TEST(BucketedAllreduce, AFailingRankReleasesThePeersAndReportsItsOwnError) {
  const int n = 2;
  auto comm = dpt::parallel::make_in_process_communicator("ring", n);
  dpt::parallel::DevicePool pool(cpu_devices(n), n);
  pool.set_abort_hook([&] { comm->abort("a rank failed"); });
  std::vector<std::vector<Tensor>> params;
  for (int r = 0; r < n; ++r) params.push_back(dpt::parallel::replicate(nn::lenet_params(1, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses), dpt::Device::cpu(r)));
  std::vector<std::unique_ptr<GradientBucketer>> bucketers;
  for (int r = 0; r < n; ++r) bucketers.push_back(std::make_unique<GradientBucketer>(*comm, r, params[r], 16 * 1024));
  const std::string error = dpt::testing_support::error_of<std::runtime_error>([&] {
    pool.run_all([&](int rank) {
      auto [X, y] = random_images(4, rank);
      bucketers[rank]->backward_and_allreduce(
          [&] {
            if (rank == 1) throw std::runtime_error("rank 1 broke in backward");
            dpt::autograd::backward(dpt::ops::cross_entropy(nn::lenet(X, params[rank]), y, dpt::ops::Reduction::sum));
          },
          1.0f);
    });
  });
  EXPECT_THAT(error, ::testing::HasSubstr("rank 1 broke in backward"));
  bucketers.clear();
}

// ---------------------------------------------------------------------------------------
// DataParallel with --bucket-mb: same training as without.

TEST(DataParallelBuckets, TrainsToTheSameParametersAsWithoutBuckets) {
  const int n = 2;
  const int steps = kThreadSanitizer ? 2 : 3;
  std::vector<std::vector<float>> results[2];
  for (int bucketed = 0; bucketed < 2; ++bucketed) {
    auto net = nn::lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
    nn::init_weights(*net, nn::Init::kaiming, 5);
    dpt::parallel::DataParallelOptions options;
    options.cores = n;
    options.bucket_mb = bucketed ? 0.05 : 0.0;
    dpt::parallel::DataParallel dp(std::move(net), cpu_devices(n), options);
    ASSERT_EQ(dp.bucketer(0) != nullptr, bucketed == 1);
    dpt::optim::SGD sgd(dp.replica_parameters(), {0.1f, 0.9f, 0.0f});
    for (int s = 0; s < steps; ++s) {
      auto [X, y] = random_images(kThreadSanitizer ? 6 : 16, 40 + s);
      sgd.zero_grad();
      dp.forward_backward(X, y);
      sgd.step();
    }
    if (bucketed) {
      EXPECT_GE(dp.bucketer(1)->launched_during_backward(), 1u);
    }
    for (const Tensor& p : dp.module().parameters()) results[bucketed].push_back(p.to_vector());
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) EXPECT_EQ(results[0][i], results[1][i]) << "parameter " << i;
}

}  // namespace
