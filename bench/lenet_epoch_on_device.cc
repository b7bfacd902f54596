// One LeNet training epoch of the lesson's recipe (batch 256, lr 0.2, summed softmax
// cross-entropy, minibatch SGD) on one device, through the from-scratch ops: the GPU
// benchmark of scripts/gpu-check (--device cuda:0), which also runs on a CPU device, and
// test-set evaluation. Prints sec/epoch, eval sec and test accuracy as
// bench/pytorch_lenet.py does, so the two can be put side by side.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>

#include "dpt/autograd/node.h"
#include "dpt/core/tensor.h"
#include "dpt/data/fashion_mnist.h"
#include "dpt/data/loader.h"
#include "dpt/nn/lenet.h"
#include "dpt/ops/ops.h"
#include "dpt/optim/sgd.h"

using namespace dpt;

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double accuracy(const data::Dataset& test, const std::vector<Tensor>& params, Device device, int64_t batch_size) {
  autograd::NoGradGuard no_grad;
  data::BatchLoader loader(test, batch_size, /*shuffle=*/false, 0);
  data::Batch batch;
  int64_t correct = 0;
  while (loader.next(batch)) {
    correct += ops::count_correct(nn::lenet(batch.images.to(device), params), batch.labels.to(device));
  }
  return static_cast<double>(correct) / static_cast<double>(test.size());
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One device, one LeNet epoch at a time: sec/epoch, eval sec, test accuracy"};
  std::string device_text = "cuda:0", data_dir = "/usr/share/datasets/fashion-mnist";
  int epochs = 1;
  int64_t batch_size = 256;
  float lr = 0.2f;
  uint64_t seed = 0;
  app.add_option("--device", device_text, "cuda:N or cpu")->capture_default_str();
  app.add_option("--epochs", epochs)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--batch-size", batch_size)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--lr", lr)->capture_default_str();
  app.add_option("--seed", seed)->capture_default_str();
  app.add_option("--data", data_dir)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const Device device = parse_device(device_text);
    const data::Dataset train = data::load_fashion_mnist(data_dir, data::Split::train);
    const data::Dataset test = data::load_fashion_mnist(data_dir, data::Split::test);
    const std::vector<Tensor> params = nn::lenet_params(seed, device);
    std::printf("dptrain LeNet on %s, batch %lld, lr %g, %lld train / %lld test\n", device.str().c_str(),
                static_cast<long long>(batch_size), lr, static_cast<long long>(train.size()),
                static_cast<long long>(test.size()));
    data::BatchLoader loader(train, batch_size, /*shuffle=*/true, seed);
    double train_total = 0.0, eval_total = 0.0, test_acc = 0.0;
    for (int epoch = 0; epoch < epochs; ++epoch) {
      loader.start_epoch(epoch);
      data::Batch batch;
      double loss_sum = 0.0;
      const auto start = std::chrono::steady_clock::now();
      while (loader.next(batch)) {
        const Tensor loss = ops::cross_entropy(nn::lenet(batch.images.to(device), params), batch.labels.to(device),
                                               ops::Reduction::sum);
        loss.backward();
        optim::sgd(params, lr, batch.global_size);
        loss_sum += loss.item();  // waits for the step, as PyTorch's loss.item() does
      }
      const double train_sec = seconds_since(start);
      const auto eval_start = std::chrono::steady_clock::now();
      test_acc = accuracy(test, params, device, batch_size);
      const double eval_sec = seconds_since(eval_start);
      train_total += train_sec;
      eval_total += eval_sec;
      std::printf("epoch %d: train loss %.4f, test acc %.4f, train %.2f s, eval %.2f s\n", epoch + 1,
                  loss_sum / static_cast<double>(train.size()), test_acc, train_sec, eval_sec);
      std::fflush(stdout);
    }
    std::printf("sec/epoch: %.3f\neval sec: %.3f\ntest acc: %.4f\n", train_total / epochs, eval_total / epochs,
                test_acc);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lenet_epoch_on_device: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
