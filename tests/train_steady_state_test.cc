// Training's steady state on the CPU: once the first steps have run, a step takes no host
// memory from the system (every tensor's block comes from the allocator's cache,
// core/allocator.h) and builds no oneDNN primitive or reorder (every one comes from the
// kernels' cache, ops/cpu/dnnl_context.h). Checked for LeNet and ResNet-18 (which has
// BatchNorm, residual adds and fused kernels), on one device and on two, with momentum.
// And between ResNet-18's layers no activation changes layout: a step reorders only the
// convolutions' weights (into each pass's layout, and each weight gradient back to plain).
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "dpt/data/idx_dataset.h"
#include "dpt/core/allocator.h"
#include "dpt/core/cpu_features.h"
#include "dpt/nn/init.h"
#include "dpt/nn/models.h"
#include "dpt/nn/layers.h"
#include "dpt/ops/cpu/dnnl_context.h"
#include "dpt/ops/cpu/layout.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "test_support.h"

namespace {
namespace nn = dpt::nn;
using dpt::parallel::DataParallel;

struct Counts {
  int64_t host_blocks, primitives;
};
Counts counts_now() { return {dpt::host_blocks_from_system(), dpt::ops::cpu::primitives_built()}; }

// Trains `net` for `warm_up` steps, then `steps` more on other data of the same shape, and
// returns what those last steps took from the system and built.
Counts taken_by_settled_steps(std::unique_ptr<nn::Module> net, int devices, int64_t batch, int warm_up, int steps) {
  // One core per device: no OpenMP team (ThreadSanitizer cannot see libgomp's barrier).
  DataParallel parallel(std::move(net), dpt::parallel::cpu_devices(devices), "ring", devices);
  dpt::optim::SGD sgd(parallel.replica_parameters(), {/*lr=*/0.01f, /*momentum=*/0.9f, /*weight_decay=*/1e-4f});
  const auto step = [&](uint64_t seed) {
    const auto [X, y] = dpt::testing_support::random_images(batch, seed);
    (void)parallel.forward_backward(X, y);  // zeroes the last step's gradients, as training does
    sgd.step();
  };
  for (int s = 0; s < warm_up; ++s) step(static_cast<uint64_t>(s));
  const Counts before = counts_now();
  for (int s = 0; s < steps; ++s) step(static_cast<uint64_t>(100 + s));
  const Counts after = counts_now();
  return {after.host_blocks - before.host_blocks, after.primitives - before.primitives};
}

void expect_settled(const Counts& taken, const std::string& what) {
  EXPECT_EQ(taken.host_blocks, 0) << what << ": host blocks taken from the system after the warm-up";
  EXPECT_EQ(taken.primitives, 0) << what << ": oneDNN primitives built after the warm-up";
}

TEST(SteadyState, LeNetStepsTakeNoMemoryAndBuildNoPrimitive) {
  for (int devices : {1, 2}) {
    auto net = nn::lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
    nn::init_weights(*net, nn::Init::kaiming, 0);
    expect_settled(taken_by_settled_steps(std::move(net), devices, 64, 2, 3), "LeNet on cpu:" + std::to_string(devices));
  }
}

TEST(SteadyState, Resnet18StepsTakeNoMemoryAndBuildNoPrimitive) {
  for (int devices : {1, 2}) {
    auto net = nn::resnet18(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
    nn::init_weights(*net, nn::Init::kaiming, 0);
    expect_settled(taken_by_settled_steps(std::move(net), devices, 8, 2, 2),
                   "ResNet-18 on cpu:" + std::to_string(devices));
  }
}

// The counters themselves move: a step of a new shape builds primitives, and a new size
// takes a block from the system (else the tests above could not fail).
TEST(SteadyState, TheCountersSeeANewShape) {
  const Counts before = counts_now();
  auto net = nn::lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  nn::init_weights(*net, nn::Init::kaiming, 0);
  (void)taken_by_settled_steps(std::move(net), 1, 37, 0, 1);
  const Counts after = counts_now();
  EXPECT_GT(after.primitives, before.primitives);
  EXPECT_GT(after.host_blocks, before.host_blocks);
}

}  // namespace

// Reorders in one settled ResNet-18 training step on one device: each of the 20
// convolutions reorders its weights for forward and for backward-data (the stem has no
// backward-data) and its weight gradient back to plain, and nothing else: the activations
// and their gradients stay in the convolutions' layout from the stem to the global pool
// (BatchNorm, ReLU, the residual add and the sums of gradients included), and the pool's
// 1 x 1 output reads the same in every layout. On AVX-512 that is exact; elsewhere the
// single-channel input may be reordered into the blocked layout as well.
TEST(SteadyState, Resnet18StepReordersOnlyItsConvolutionWeights) {
  auto net = nn::resnet18(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  nn::init_weights(*net, nn::Init::kaiming, 0);
  const std::function<int64_t(const nn::Module&)> count_convolutions = [&](const nn::Module& m) {
    int64_t n = dynamic_cast<const nn::Conv2d*>(&m) != nullptr;
    for (const auto& [name, child] : m.named_children()) n += count_convolutions(*child);
    return n;
  };
  const int64_t convolutions = count_convolutions(*net);
  ASSERT_EQ(convolutions, 20);
  DataParallel parallel(std::move(net), dpt::parallel::cpu_devices(1), "ring", 1);
  dpt::optim::SGD sgd(parallel.replica_parameters(), {/*lr=*/0.01f, /*momentum=*/0.9f, /*weight_decay=*/0.0f});
  int64_t reorders = 0;
  for (uint64_t s = 0; s < 2; ++s) {  // the second step is the settled one
    const auto [X, y] = dpt::testing_support::random_images(8, s);
    const int64_t before = dpt::ops::cpu::reorder_count();
    (void)parallel.forward_backward(X, y);
    sgd.step();
    reorders = dpt::ops::cpu::reorder_count() - before;
  }
  const int64_t weights = 3 * convolutions - 1;
  if (dpt::cpu_has_avx512f()) {
    EXPECT_EQ(reorders, weights) << "a step reorders more than its convolutions' weights";
  } else {
    EXPECT_LE(reorders, weights + 1);
  }
}
