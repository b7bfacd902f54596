// Execution options belong to a run (ops/precision.h): the replica engine installs its
// run's precision, conv algorithm and fusion on its device threads, so two runs in one
// process compute each as configured, and the thread that built them keeps its own.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "dpt/data/fashion_mnist.h"
#include "dpt/nn/init.h"
#include "dpt/nn/models.h"
#include "dpt/ops/precision.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/device_pool.h"
#include "test_support.h"

namespace {

namespace nn = dpt::nn;
namespace ops = dpt::ops;
using dpt::Tensor;

TEST(ExecutionOptions, ScopesNestAndRestore) {
  EXPECT_EQ(ops::conv_algorithm(), ops::ConvAlgorithm::winograd);
  {
    const ops::ExecutionScope outer(ops::ExecutionOptions{.conv_algorithm = ops::ConvAlgorithm::direct});
    EXPECT_EQ(ops::conv_algorithm(), ops::ConvAlgorithm::direct);
    {
      const ops::ExecutionScope inner(ops::ExecutionOptions{.fusion = false});
      EXPECT_EQ(ops::conv_algorithm(), ops::ConvAlgorithm::winograd);
      EXPECT_FALSE(ops::execution().fusion);
    }
    EXPECT_EQ(ops::conv_algorithm(), ops::ConvAlgorithm::direct);
    EXPECT_TRUE(ops::execution().fusion);
  }
  EXPECT_EQ(ops::conv_algorithm(), ops::ConvAlgorithm::winograd);
}

TEST(ExecutionOptions, ADevicePoolsWorkersComputeWithItsRunsOptions) {
  dpt::parallel::DevicePool pool(dpt::parallel::cpu_devices(2), 2,
                                 ops::ExecutionOptions{.conv_algorithm = ops::ConvAlgorithm::direct, .fusion = false});
  std::vector<int> direct(2, 0), fused(2, 1);
  pool.run_all([&](int rank) {
    direct[rank] = ops::conv_algorithm() == ops::ConvAlgorithm::direct;
    fused[rank] = ops::execution().fusion;
  });
  EXPECT_EQ(direct, (std::vector<int>{1, 1}));
  EXPECT_EQ(fused, (std::vector<int>{0, 0}));
  EXPECT_EQ(ops::conv_algorithm(), ops::ConvAlgorithm::winograd) << "the pool changed its builder's thread";
}

// One step of LeNet's gradients (conv2 has 6 input channels: bf16 applies to it).
std::vector<std::vector<float>> gradients(dpt::parallel::DataParallel& net) {
  auto [X, y] = dpt::testing_support::random_images(16, 5);
  net.forward_backward(X, y);
  std::vector<std::vector<float>> grads;
  const std::vector<std::vector<Tensor>> replicas = net.replica_parameters();
  for (const Tensor& p : replicas[0]) grads.push_back(p.grad().to_vector());
  return grads;
}

std::unique_ptr<nn::Module> lenet() {
  auto net = nn::lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  nn::init_weights(*net, nn::Init::kaiming, 2);
  return net;
}

TEST(ExecutionOptions, TwoRunsInOneProcessKeepTheirOwnPrecision) {
  if (!ops::cpu_has_bf16()) GTEST_SKIP() << "this CPU has no avx512_bf16: bf16 is refused here";
  dpt::parallel::DataParallelOptions bf16_options, fp32_options;
  bf16_options.cores = fp32_options.cores = 1;
  bf16_options.execution = ops::ExecutionOptions{.precision = ops::ConvPrecision::bf16};
  fp32_options.execution = ops::ExecutionOptions{};
  // Both alive at once: a process-wide switch would give them one precision.
  dpt::parallel::DataParallel bf16_run(lenet(), dpt::parallel::cpu_devices(1), bf16_options);
  dpt::parallel::DataParallel fp32_run(lenet(), dpt::parallel::cpu_devices(1), fp32_options);
  const auto in_bf16 = gradients(bf16_run);
  const auto in_fp32 = gradients(fp32_run);
  dpt::parallel::DataParallel reference(lenet(), dpt::parallel::cpu_devices(1), fp32_options);
  EXPECT_EQ(in_fp32, gradients(reference)) << "the fp32 run's gradients are not fp32's";
  EXPECT_NE(in_bf16, in_fp32) << "the bf16 run computed in fp32";
}

}  // namespace
