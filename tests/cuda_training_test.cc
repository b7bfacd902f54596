// Training on CUDA devices against the same training on the CPU: the from-scratch
// ScratchTrainer and the concise DataParallel (with BatchNorm and momentum) on cuda:0, and
// on two GPUs over NCCL against one GPU, with the replicas bit-identical; --deterministic
// with the bits of one GPU on two replicas. Without a GPU the
// GPU tests are skipped and say why; the device-list rules run everywhere.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dpt/data/idx_dataset.h"
#include "dpt/core/random.h"
#include "dpt/core/tensor.h"
#include "dpt/cuda/runtime.h"
#include "dpt/nn/init.h"
#include "dpt/nn/layers.h"
#include "dpt/nn/lenet.h"
#include "dpt/nn/models.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "dpt/train/train_from_scratch.h"
#include "test_support.h"

using dpt::Device;
using dpt::Tensor;
namespace cuda = dpt::cuda;
namespace nn = dpt::nn;

namespace {
using dpt::testing_support::random_images;
using dpt::testing_support::small_bn_net;

const Device kGpu0{Device::Kind::cuda, 0};
const Device kGpu1{Device::Kind::cuda, 1};

// Each element within 1e-4 (relative, plus 1e-6 absolute) of the CPU's: the GPU libraries
// sum in their own order, so a few ulps of each sum per step, carried over three steps.
void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& reference, const std::string& what) {
  ASSERT_EQ(got.size(), reference.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<float> g = got[i].to_vector(), r = reference[i].to_vector();
    ASSERT_EQ(g.size(), r.size());
    size_t bad = 0;
    for (size_t k = 0; k < g.size(); ++k) {
      if (std::fabs(g[k] - r[k]) > 1e-6f + 1e-4f * std::fabs(r[k]) && ++bad <= 3) {
        ADD_FAILURE() << what << " tensor " << i << "[" << k << "]: gpu " << g[k] << " vs cpu " << r[k];
      }
    }
  }
}

void expect_bit_identical(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].to_vector(), b[i].to_vector()) << "tensor " << i;
}

dpt::train::ScratchConfig scratch_config(std::vector<Device> devices) {
  dpt::train::ScratchConfig config;
  config.devices = std::move(devices);
  config.engine.cores = 1;
  config.lr = 0.5f;
  config.training.batch_size = 16;
  return config;
}

TEST(CudaTrainingRules, MixedDevicesAndBucketsAreRefused) {
  EXPECT_CONFIG_ERROR(dpt::parallel::check_devices_for_training({Device::cpu(0), kGpu0}, 0), "devices",
                      "`devices` [cpu:0, cuda:0] mixes CPU and CUDA devices; train on one kind at a time");
  EXPECT_CONFIG_ERROR(dpt::parallel::check_devices_for_training({kGpu0}, 0.25), "bucket_mb",
                      "`bucket_mb` with CUDA devices is not supported yet");
  EXPECT_NO_THROW(dpt::parallel::check_devices_for_training({kGpu0, kGpu0}, 0));
  EXPECT_NO_THROW(dpt::parallel::check_devices_for_training({Device::cpu(0), Device::cpu(1)}, 0.25));
}

TEST(CudaTraining, ScratchStepsOnOneGpuMatchTheCpu) {
  DPT_SKIP_WITHOUT_GPUS(1);
  const std::vector<Tensor> initial = nn::lenet_params(7, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  dpt::train::ScratchTrainer cpu(scratch_config({Device::cpu(0)}), initial);
  dpt::train::ScratchTrainer gpu(scratch_config({kGpu0}), initial);
  EXPECT_EQ(gpu.device_params()[0][0].device(), kGpu0);  // the replica lives in GPU memory
  for (int step = 0; step < 3; ++step) {
    const auto [X, y] = random_images(16, 100 + step);
    const dpt::parallel::StepResult on_cpu = cpu.train_batch(X, y), on_gpu = gpu.train_batch(X, y);
    EXPECT_NEAR(on_gpu.loss_sum, on_cpu.loss_sum, 1e-4 * std::fabs(on_cpu.loss_sum));
    EXPECT_EQ(on_gpu.examples, 16);
  }
  expect_close(gpu.device_params()[0], cpu.device_params()[0], "LeNet after 3 steps");
  const auto [X, y] = random_images(40, 5);
  dpt::data::InMemoryDataset test;  // evaluation on the GPU counts as on the CPU
  test.pixels.resize(40 * 28 * 28);
  for (size_t i = 0; i < test.pixels.size(); ++i) test.pixels[i] = static_cast<uint8_t>(i * 37 % 256);
  for (int i = 0; i < 40; ++i) test.labels.push_back(i % 10);
  // Up to one argmax flipped by float noise between near-equal logits.
  EXPECT_NEAR(gpu.evaluate_accuracy(test, 16), cpu.evaluate_accuracy(test, 16), 1.0 / 40 + 1e-9);
}

TEST(CudaTraining, ScratchOnTwoGpusOverNcclMatchesOneGpuWithIdenticalReplicas) {
  DPT_SKIP_WITHOUT_GPUS(2);
  const std::vector<Tensor> initial = nn::lenet_params(8, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  dpt::train::ScratchTrainer one(scratch_config({kGpu0}), initial);
  dpt::train::ScratchTrainer two(scratch_config({kGpu0, kGpu1}), initial);
  for (int step = 0; step < 3; ++step) {
    const auto [X, y] = random_images(16, 200 + step);
    one.train_batch(X, y);
    two.train_batch(X, y);
  }
  expect_bit_identical(two.device_params()[0], two.device_params()[1]);
  expect_close(two.device_params()[0], one.device_params()[0], "2 GPUs against 1");
}

// Two steps of SGD with momentum through DataParallel on batches of `batch`; returns the
// parameters and buffers. `chunk` > 0: in deterministic mode with chunks of that size.
std::vector<Tensor> concise_steps(const std::vector<Device>& devices, int64_t chunk = 0, int64_t batch = 12) {
  dpt::parallel::DataParallelOptions options;
  options.cores = static_cast<int>(devices.size());
  options.deterministic_chunk = chunk;
  dpt::parallel::DataParallel net(small_bn_net(), devices, options);
  dpt::optim::SGD sgd(net.replica_parameters(), {0.1f, 0.9f, 0.0f});
  for (int step = 0; step < 2; ++step) {
    const auto [X, y] = random_images(batch, 300 + step);
    sgd.zero_grad();
    (void)net.forward_backward(X, y);
    sgd.step();
  }
  std::vector<Tensor> state = net.replica(0).parameters();
  for (const Tensor& b : net.replica(0).buffers()) state.push_back(b);
  if (devices.size() > 1) {
    std::vector<Tensor> other = net.replica(1).parameters();
    for (const Tensor& b : net.replica(1).buffers()) other.push_back(b);
    expect_bit_identical(other, state);
  }
  return state;
}

TEST(CudaTraining, DataParallelWithBatchNormAndMomentumOnOneGpuMatchesTheCpu) {
  DPT_SKIP_WITHOUT_GPUS(1);
  const std::vector<Tensor> gpu = concise_steps({kGpu0});
  EXPECT_EQ(gpu[0].device(), kGpu0);
  expect_close(gpu, concise_steps({Device::cpu(0)}), "conv-BN-fc after 2 momentum steps");
}

TEST(CudaTraining, DataParallelOnTwoGpusMatchesOneGpu) {
  DPT_SKIP_WITHOUT_GPUS(2);
  expect_close(concise_steps({kGpu0, kGpu1}), concise_steps({kGpu0}), "2 GPUs against 1");
}

TEST(CudaTraining, ScratchWithTwoReplicasOnOneGpuMatchesOneReplica) {
  DPT_SKIP_WITHOUT_GPUS(1);
  const std::vector<Tensor> initial = nn::lenet_params(8, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  dpt::train::ScratchTrainer one(scratch_config({kGpu0}), initial);
  dpt::train::ScratchTrainer two(scratch_config({kGpu0, kGpu0}), initial);  // over the host ring
  for (int step = 0; step < 3; ++step) {
    const auto [X, y] = random_images(16, 200 + step);
    one.train_batch(X, y);
    two.train_batch(X, y);
  }
  expect_bit_identical(two.device_params()[0], two.device_params()[1]);
  expect_close(two.device_params()[0], one.device_params()[0], "2 replicas on cuda:0 against 1");
}

TEST(CudaTraining, DataParallelWithTwoReplicasOnOneGpuMatchesOneReplica) {
  DPT_SKIP_WITHOUT_GPUS(1);
  expect_close(concise_steps({kGpu0, kGpu0}), concise_steps({kGpu0}), "2 replicas on cuda:0 against 1");
}

// The same bits on one replica and on two: two replicas of cuda:0 over the host's tree
// allreduce, and two GPUs over NCCL (the tree's slices staged through GPU memory; the
// GPUs must be of one kind, as cuDNN and cuBLAS promise equal bits only on equal GPUs).
TEST(CudaTraining, DeterministicTwoReplicasOnOneGpuGiveTheBitsOfOne) {
  DPT_SKIP_WITHOUT_GPUS(1);
  // Batch 24 in chunks of 8: 3 chunks, split unevenly over the 2 replicas.
  expect_bit_identical(concise_steps({kGpu0, kGpu0}, 8, 24), concise_steps({kGpu0}, 8, 24));
}

TEST(CudaTraining, DeterministicTwoGpusOverNcclGiveTheBitsOfOne) {
  DPT_SKIP_WITHOUT_GPUS(2);
  expect_bit_identical(concise_steps({kGpu0, kGpu1}, 8, 24), concise_steps({kGpu0}, 8, 24));
}

// One SGD step of ResNet-18 (Kaiming, from one seed) on a GPU against the same on the CPU.
std::vector<Tensor> resnet_step(Device device) {
  auto model = nn::resnet18(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  nn::init_weights(*model, nn::Init::kaiming, 3);
  dpt::parallel::DataParallel net(std::move(model), {device});
  dpt::optim::SGD sgd(net.replica_parameters(), {0.05f, 0.0f, 0.0f});
  const auto [X, y] = random_images(4, 400);
  sgd.zero_grad();
  (void)net.forward_backward(X, y);
  sgd.step();
  std::vector<Tensor> state = net.replica(0).parameters();
  for (const Tensor& b : net.replica(0).buffers()) state.push_back(b);
  return state;
}

TEST(CudaTraining, ResNet18StepOnOneGpuMatchesTheCpu) {
  DPT_SKIP_WITHOUT_GPUS(1);
  expect_close(resnet_step(kGpu0), resnet_step(Device::cpu(0)), "ResNet-18 after one step");
}

// A bad label in the second replica's shard stops the step on every replica with the CPU
// backend's message (checked on the host where the batch is cut), instead of hanging the
// replica that went on to the allreduce.
void expect_bad_label_stops_the_step(const std::vector<Device>& devices) {
  dpt::parallel::DataParallel net(small_bn_net(), devices);
  auto [X, y] = random_images(8, 500);
  y.data<int64_t>()[6] = 10;  // rows 4..7 go to the second replica: its index 2
  EXPECT_EQ(dpt::testing_support::error_of<std::invalid_argument>([&] { (void)net.forward_backward(X, y); }),
            "cross_entropy: label 10 at index 2 is outside [0, 10)");
}

TEST(CudaTraining, BadLabelOnOneOfTwoReplicasOnOneGpuRaisesWithoutHanging) {
  DPT_SKIP_WITHOUT_GPUS(1);
  expect_bad_label_stops_the_step({kGpu0, kGpu0});
}

TEST(CudaTraining, BadLabelOnOneOfTwoGpusOverNcclRaisesWithoutHanging) {
  DPT_SKIP_WITHOUT_GPUS(2);
  expect_bad_label_stops_the_step({kGpu0, kGpu1});  // the other rank released by ncclCommAbort
}

}  // namespace
