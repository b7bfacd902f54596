// The CUDA backend against the CPU backend: every op on the same inputs on cuda:0 and on
// the host, forward and backward, then one whole LeNet training step. Where this process
// sees no GPU (a build without CUDA, no driver, no GPU) each GPU test is skipped and says
// why; the tests of what happens without a GPU run instead.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "dpt/data/idx_dataset.h"
#include "dpt/autograd/engine.h"
#include "dpt/core/tensor.h"
#include "dpt/cuda/runtime.h"
#include "dpt/nn/lenet.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/ledger.h"
#include "dpt/ops/ops.h"
#include "dpt/optim/sgd.h"
#include "dpt/parallel/replicate.h"
#include "test_support.h"

using dpt::Device;
using dpt::DType;
using dpt::Shape;
using dpt::Tensor;
namespace ops = dpt::ops;
namespace cuda = dpt::cuda;

namespace {
using dpt::testing_support::random_tensor;

const Device kGpu{Device::Kind::cuda, 0};

// Each element of the GPU result within `tolerance` * (1 + |cpu|) of the CPU one. The two
// backends sum in different orders (cuDNN and cuBLAS pick their own blocking), so equal
// to a few ulps of the sums' size, not bit for bit.
void expect_close(const Tensor& gpu, const Tensor& cpu, float tolerance, const std::string& what) {
  ASSERT_EQ(gpu.device(), kGpu) << what;
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  const std::vector<float> g = gpu.to_vector(), c = cpu.to_vector();
  int reported = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (std::fabs(g[i] - c[i]) > tolerance * (1.0f + std::fabs(c[i])) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: gpu " << g[i] << " vs cpu " << c[i];
    }
  }
}
constexpr float kTolerance = 1e-4f;

Tensor on_gpu(const Tensor& t) { return t.to(kGpu); }
const ops::Backend& gpu_kernels() { return ops::backend_for(kGpu); }
const ops::Backend& cpu_kernels() { return ops::backend_for(Device::cpu()); }

// The op's forward on both devices, then the gradient of sum(out * r) for every input.
template <class Op>
void expect_op_matches(const std::vector<Tensor>& inputs, Op op, const std::string& what) {
  std::vector<Tensor> cpu_in, gpu_in;
  for (const Tensor& t : inputs) {
    cpu_in.push_back(t.clone().set_requires_grad(true));
    gpu_in.push_back(on_gpu(t).set_requires_grad(true));
  }
  const Tensor cpu_out = op(cpu_in), gpu_out = op(gpu_in);
  expect_close(gpu_out, cpu_out, kTolerance, what + " forward");
  // sum(out * r) through ops the test does not check here: linear of the flattened output.
  const Tensor r = random_tensor({1, cpu_out.numel()}, 99);
  const auto weighted_sum = [&](const Tensor& out, const Tensor& weights) {
    return ops::linear(ops::reshape(out, {1, out.numel()}), weights, Tensor());
  };
  dpt::autograd::backward(weighted_sum(cpu_out, r));
  dpt::autograd::backward(weighted_sum(gpu_out, on_gpu(r)));
  for (size_t i = 0; i < inputs.size(); ++i) {
    expect_close(gpu_in[i].grad(), cpu_in[i].grad(), kTolerance, what + " gradient of input " + std::to_string(i));
  }
}

TEST(CudaWithoutGpu, AskingForAGpuTensorSaysWhyThereIsNone) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "this process has a GPU: the GPU tests below run instead";
  ASSERT_FALSE(cuda::unavailable_reason().empty());
  try {
    Tensor::empty({2}, DType::f32, kGpu);
    FAIL() << "a tensor on cuda:0 was created without a GPU";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "cuda:0: " + cuda::unavailable_reason());
  }
}

TEST(CudaWithoutGpu, ReasonSaysWhetherTheBuildHasCuda) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "this process has a GPU";
  if (cuda::built_with_cuda()) {
    EXPECT_THAT(cuda::unavailable_reason(), ::testing::StartsWith("no "));
  } else {
    EXPECT_THAT(cuda::unavailable_reason(), ::testing::HasSubstr("built without CUDA"));
  }
}

TEST(CudaTensor, RoundTripZerosFullCloneAndCopy) {
  DPT_SKIP_WITHOUT_GPUS(1);
  const Tensor host = random_tensor({3, 5}, 1);
  const Tensor gpu = on_gpu(host);
  EXPECT_EQ(gpu.device(), kGpu);
  EXPECT_EQ(gpu.to_vector(), host.to_vector());
  EXPECT_EQ(gpu.clone().to_vector(), host.to_vector());
  EXPECT_EQ(Tensor::zeros({4}, DType::f32, kGpu).to_vector(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(Tensor::full({1}, 2.5f, kGpu).item(), 2.5f);
  const Tensor into = Tensor::zeros({3, 5});
  into.copy_from(gpu);
  EXPECT_EQ(into.to_vector(), host.to_vector());
  EXPECT_THROW(gpu.data<float>(), std::logic_error);  // no host pointer into GPU memory
  EXPECT_EQ(Tensor::from_labels({7, 3}, kGpu).to(Device::cpu()).data<int64_t>()[1], 3);
}

TEST(CudaTensor, CopyBetweenGpus) {
  DPT_SKIP_WITHOUT_GPUS(2);
  const Tensor host = random_tensor({1000}, 2);
  EXPECT_EQ(on_gpu(host).to(Device{Device::Kind::cuda, 1}).to_vector(), host.to_vector());
}

TEST(CudaTensor, MixingDevicesInOneOpIsRefused) {
  DPT_SKIP_WITHOUT_GPUS(1);
  EXPECT_THROW(ops::add(random_tensor({2}, 1), on_gpu(random_tensor({2}, 2))), std::invalid_argument);
}

TEST(CudaOps, Conv2dWithBiasStrideAndPadding) {
  DPT_SKIP_WITHOUT_GPUS(1);
  expect_op_matches(
      {random_tensor({4, 1, 28, 28}, 1), random_tensor({20, 1, 3, 3}, 2), random_tensor({20}, 3)},
      [](const std::vector<Tensor>& in) { return ops::conv2d(in[0], in[1], in[2]); }, "conv 1->20");
  expect_op_matches(
      {random_tensor({3, 4, 9, 9}, 4), random_tensor({5, 4, 3, 3}, 5), random_tensor({5}, 6)},
      [](const std::vector<Tensor>& in) { return ops::conv2d(in[0], in[1], in[2], 2, 1); }, "conv stride 2 pad 1");
  expect_op_matches(
      {random_tensor({2, 20, 13, 13}, 7), random_tensor({50, 20, 5, 5}, 8)},
      [](const std::vector<Tensor>& in) { return ops::conv2d(in[0], in[1], Tensor()); }, "conv 20->50 without bias");
}

TEST(CudaOps, Conv2dReluFused) {
  DPT_SKIP_WITHOUT_GPUS(1);
  expect_op_matches(
      {random_tensor({4, 3, 10, 10}, 1), random_tensor({8, 3, 3, 3}, 2), random_tensor({8}, 3)},
      [](const std::vector<Tensor>& in) { return ops::conv2d_relu(in[0], in[1], in[2], 1, 1); }, "conv2d_relu");
}

TEST(CudaOps, Conv2dReluAvgPool) {
  DPT_SKIP_WITHOUT_GPUS(1);
  // 9 -> 4 after pooling: the backward leaves the dropped row and column at 0.
  expect_op_matches(
      {random_tensor({4, 20, 13, 13}, 1), random_tensor({50, 20, 5, 5}, 2), random_tensor({50}, 3)},
      [](const std::vector<Tensor>& in) { return ops::conv2d_relu_avg_pool2d(in[0], in[1], in[2], 2); },
      "conv2d_relu_avg_pool2d");
}

TEST(CudaOps, MaxAndAvgPool) {
  DPT_SKIP_WITHOUT_GPUS(1);
  expect_op_matches(
      {random_tensor({2, 3, 8, 8}, 1)}, [](const std::vector<Tensor>& in) { return ops::max_pool2d(in[0], 2, 2); },
      "max pool");
  expect_op_matches(
      {random_tensor({2, 3, 9, 9}, 2)}, [](const std::vector<Tensor>& in) { return ops::avg_pool2d(in[0], 3, 2); },
      "avg pool");
  expect_op_matches(
      {random_tensor({2, 3, 5, 7}, 3)}, [](const std::vector<Tensor>& in) { return ops::global_avg_pool2d(in[0]); },
      "global avg pool");
}

TEST(CudaOps, ReluLinearMatmulAdd) {
  DPT_SKIP_WITHOUT_GPUS(1);
  expect_op_matches(
      {random_tensor({7, 9}, 1)}, [](const std::vector<Tensor>& in) { return ops::relu(in[0]); }, "relu");
  expect_op_matches(
      {random_tensor({6, 800}, 2), random_tensor({128, 800}, 3), random_tensor({128}, 4)},
      [](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1], in[2]); }, "linear");
  expect_op_matches(
      {random_tensor({5, 3}, 5), random_tensor({3, 4}, 6)},
      [](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); }, "matmul");
  expect_op_matches(
      {random_tensor({4, 6}, 7), random_tensor({4, 6}, 8)},
      [](const std::vector<Tensor>& in) { return ops::add(in[0], in[1]); }, "add");
  // Every transpose combination of the backend's matmul.
  const Tensor a = random_tensor({4, 3}, 9), b = random_tensor({4, 3}, 10);
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const Tensor left = ta ? a : random_tensor({3, 4}, 11);
      const Tensor right = tb ? b : random_tensor({4, 3}, 12);
      if ((ta ? left.dim(0) : left.dim(1)) != (tb ? right.dim(1) : right.dim(0))) continue;
      expect_close(gpu_kernels().matmul(on_gpu(left), ta, on_gpu(right), tb), cpu_kernels().matmul(left, ta, right, tb),
                   kTolerance, "matmul transpose " + std::to_string(ta) + std::to_string(tb));
    }
  }
}

TEST(CudaOps, BatchNormTrainingAndEvalWithRunningStats) {
  DPT_SKIP_WITHOUT_GPUS(1);
  for (const bool training : {true, false}) {
    Tensor cpu_mean = random_tensor({3}, 1), cpu_var = random_tensor({3}, 2, 0.5f, 2.0f);
    Tensor gpu_mean = on_gpu(cpu_mean), gpu_var = on_gpu(cpu_var);
    const auto op = [&](const std::vector<Tensor>& in) {
      const bool gpu = in[0].device() == kGpu;
      return ops::batch_norm2d(in[0], in[1], in[2], gpu ? gpu_mean : cpu_mean, gpu ? gpu_var : cpu_var, training);
    };
    expect_op_matches({random_tensor({4, 3, 5, 5}, 3), random_tensor({3}, 4), random_tensor({3}, 5)}, op,
                      training ? "batch norm training" : "batch norm eval");
    expect_close(gpu_mean, cpu_mean, kTolerance, "running mean");
    expect_close(gpu_var, cpu_var, kTolerance, "running variance");
  }
}

TEST(CudaOps, CrossEntropyEveryReduction) {
  DPT_SKIP_WITHOUT_GPUS(1);
  const Tensor labels = Tensor::from_labels({0, 9, 3, 3, 7});
  for (const auto reduction : {ops::Reduction::none, ops::Reduction::sum, ops::Reduction::mean}) {
    expect_op_matches(
        {random_tensor({5, 10}, 1, -3.0f, 3.0f)},
        [&](const std::vector<Tensor>& in) {
          return ops::cross_entropy(in[0], in[0].device() == kGpu ? on_gpu(labels) : labels, reduction);
        },
        "cross entropy " + std::to_string(static_cast<int>(reduction)));
  }
}

// The GPU path checks labels on the host, where split_batch cut them (no read-back of a
// device flag per step), with the CPU backend's message; the host check needs no GPU.
TEST(CudaOps, CrossEntropyNamesABadLabelAsTheCpuDoes) {
  const Tensor logits = random_tensor({3, 10}, 1), labels = Tensor::from_labels({1, 10, -1});
  const std::string cpu_error =
      dpt::testing_support::error_of<std::invalid_argument>([&] { ops::cross_entropy(logits, labels); });
  EXPECT_EQ(cpu_error, "cross_entropy: label 10 at index 1 is outside [0, 10)");
  EXPECT_EQ(dpt::testing_support::error_of<std::invalid_argument>([&] { ops::check_labels(labels, 10); }), cpu_error);
  DPT_SKIP_WITHOUT_GPUS(1);
  const std::vector<dpt::parallel::Shard> shards = dpt::parallel::split_batch(logits, labels, {kGpu});
  EXPECT_EQ(dpt::testing_support::error_of<std::invalid_argument>(
                [&] { dpt::parallel::shard_loss_sum(on_gpu(logits), shards[0]); }),
            cpu_error);
  // A shard built without its host labels is checked too (its labels copied back).
  const dpt::parallel::Shard bare{on_gpu(logits), on_gpu(labels), Tensor()};
  EXPECT_EQ(dpt::testing_support::error_of<std::invalid_argument>(
                [&] { dpt::parallel::shard_loss_sum(on_gpu(logits), bare); }),
            cpu_error);
}

// The step ledger's kernels against the CPU's (tests/ops_ledger_test.cc): the same figures
// and the same first non-finite update, including a gradient past one grid's reach
// (16.8M elements) whose only infinity is its last value.
TEST(CudaOps, StepLedgerRecordsAsTheCpuDoes) {
  DPT_SKIP_WITHOUT_GPUS(1);
  const Tensor logits = random_tensor({64, 10}, 3);
  std::vector<int64_t> label_values(64);
  for (int64_t i = 0; i < 64; ++i) label_values[i] = (i * 7) % 10;
  const Tensor labels = Tensor::from_labels(label_values);
  const Tensor loss = Tensor::from_vector({0.625f}, {1});
  const Tensor nan_loss = Tensor::from_vector({NAN}, {1});
  const Tensor fine = random_tensor({1000}, 4);
  Tensor big = Tensor::zeros({(int64_t{1} << 24) + 4096});
  big.data<float>()[big.numel() - 1] = -INFINITY;
  const auto run = [&](Device d) {
    const Tensor ledger = ops::new_ledger(d);
    ops::add_step_figures(ledger, loss.to(d), logits.to(d), labels.to(d));
    ops::add_step_figures(ledger, loss.to(d), logits.to(d), labels.to(d));
    ops::record_non_finite(ledger, 1, {fine.to(d)});
    ops::record_non_finite(ledger, 2, {fine.to(d), Tensor(), big.to(d)});
    const ops::LedgerValues first = ops::take_ledger(ledger);
    ops::add_step_figures(ledger, nan_loss.to(d), logits.to(d), labels.to(d));
    ops::record_non_finite(ledger, 3, {big.to(d)});
    return std::pair{first, ops::take_ledger(ledger)};
  };
  const auto [cpu_first, cpu_second] = run(Device::cpu());
  const auto [gpu_first, gpu_second] = run(kGpu);
  EXPECT_EQ(gpu_first.loss_sum, cpu_first.loss_sum);
  EXPECT_EQ(gpu_first.correct, cpu_first.correct);
  EXPECT_EQ(cpu_first.bad_tag, 2);
  EXPECT_EQ(gpu_first.bad_tag, 2);
  EXPECT_EQ(gpu_first.bad_cause, 2) << "the undefined gradient keeps its index";
  EXPECT_EQ(gpu_first.bad_count, 1);
  EXPECT_EQ(gpu_first.bad_first, ops::kNegInfBit);
  EXPECT_EQ(gpu_second.bad_tag, 3);
  EXPECT_EQ(gpu_second.bad_cause, -1) << "the loss counts before the gradients";
  EXPECT_EQ(gpu_second.bad_first, cpu_second.bad_first);
}

TEST(CudaOps, ArgmaxAndCountCorrectTakeTheFirstMaximum) {
  DPT_SKIP_WITHOUT_GPUS(1);
  const Tensor logits = Tensor::from_vector({1, 5, 5, 0, /**/ 2, 2, 1, 0, /**/ -1, -2, -3, 4}, {3, 4});
  const Tensor labels = Tensor::from_labels({1, 1, 3});
  const Tensor gpu_argmax = ops::argmax(on_gpu(logits)).to(Device::cpu());
  EXPECT_EQ(std::vector<int64_t>(gpu_argmax.data<int64_t>(), gpu_argmax.data<int64_t>() + 3),
            (std::vector<int64_t>{1, 0, 3}));
  EXPECT_EQ(ops::count_correct(on_gpu(logits), on_gpu(labels)), 2);
  EXPECT_EQ(ops::count_correct(logits, labels), 2);
}

TEST(CudaOps, SgdWithAndWithoutMomentum) {
  DPT_SKIP_WITHOUT_GPUS(1);
  const Tensor param = random_tensor({100}, 1), grad = random_tensor({100}, 2);
  for (const bool momentum : {false, true}) {
    const Tensor p_cpu = param.clone(), p_gpu = on_gpu(param);
    const Tensor v_cpu = momentum ? Tensor::zeros({100}) : Tensor();
    const Tensor v_gpu = momentum ? Tensor::zeros({100}, DType::f32, kGpu) : Tensor();
    for (const bool first : {true, false}) {
      const ops::SgdStep step{0.1f, 0.9f, 0.01f, first, /*nesterov=*/false};
      cpu_kernels().sgd_update(p_cpu, grad, v_cpu, step);
      gpu_kernels().sgd_update(p_gpu, on_gpu(grad), v_gpu, step);
    }
    expect_close(p_gpu, p_cpu, 1e-6f, momentum ? "sgd with momentum" : "sgd");
  }
}

// The lesson's LeNet, one step of minibatch SGD on 32 images, on cuda:0 and on the CPU:
// the same loss and the same updated weights.
TEST(CudaTraining, OneLeNetStepEqualsTheCpuStep) {
  DPT_SKIP_WITHOUT_GPUS(1);
  const Tensor images = random_tensor({32, 1, 28, 28}, 5, 0.0f, 1.0f);
  std::vector<int64_t> label_values;
  for (int i = 0; i < 32; ++i) label_values.push_back(i * 7 % 10);
  const Tensor labels = Tensor::from_labels(label_values);
  const auto step = [&](Device device) {
    std::vector<Tensor> params = dpt::nn::lenet_params(3, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses, device);
    const Tensor loss =
        ops::cross_entropy(dpt::nn::lenet(images.to(device), params), labels.to(device), ops::Reduction::sum);
    dpt::autograd::backward(loss);
    dpt::optim::sgd(params, 0.9f, 32);
    params.push_back(loss.detach());
    return params;
  };
  const std::vector<Tensor> cpu = step(Device::cpu()), gpu = step(kGpu);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    expect_close(gpu[i], cpu[i], kTolerance, i + 1 < cpu.size() ? "parameter " + std::to_string(i) : "loss");
  }
}

}  // namespace
