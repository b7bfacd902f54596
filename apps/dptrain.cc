// dptrain: data-parallel training of convolutional networks from the command line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>

#include "dpt/data/fashion_mnist.h"
#include "dpt/parallel/device_list.h"
#include "dpt/train/train_from_scratch.h"

namespace {

struct TrainFlags {
  std::string model = "lenet";
  std::string devices = "cpu:1";
  std::string allreduce = "ring";
  std::string data_dir = dpt::data::kDefaultDataDir;
  dpt::train::ScratchConfig config;
};

void add_train_flags(CLI::App& train, TrainFlags& flags) {
  train.add_option("--model", flags.model, "Network to train")
      ->check(CLI::IsMember({"lenet"}))
      ->capture_default_str();
  train.add_option("--devices", flags.devices,
                   "Devices, one model replica each: cpu:N (N CPU devices sharing the cores), "
                   "cuda:0,cuda:1 (GPUs by index), or a count such as 2")
      ->capture_default_str();
  train.add_option("--epochs", flags.config.epochs, "Passes over the training set")->capture_default_str();
  train.add_option("--batch-size", flags.config.batch_size, "Global minibatch, split across the devices")
      ->capture_default_str();
  train.add_option("--lr", flags.config.lr, "SGD learning rate (the step divides by the batch size)")
      ->capture_default_str();
  train.add_option("--seed", flags.config.seed, "Seed for parameter init and shuffling")->capture_default_str();
  train.add_option("--data", flags.data_dir, "Fashion-MNIST directory (IDX files, gzipped or plain)")
      ->capture_default_str();
  train.add_option("--allreduce", flags.allreduce, "Gradient allreduce algorithm between devices")
      ->check(CLI::IsMember({"naive", "ring"}))
      ->capture_default_str();
  train.add_option("--cores", flags.config.cores, "CPU cores to split between the CPU devices")
      ->capture_default_str();
}

int run_train(TrainFlags& flags) {
  using namespace dpt;
  flags.config.devices = parallel::parse_device_list(flags.devices, /*cuda_device_count=*/0);
  flags.config.allreduce = flags.allreduce;
  train::validate(flags.config);
  const data::Dataset train_data = data::load_fashion_mnist(flags.data_dir, data::Split::train);
  const data::Dataset test_data = data::load_fashion_mnist(flags.data_dir, data::Split::test);
  const int cpu_threads = std::max(1, flags.config.cores / static_cast<int>(flags.config.devices.size()));
  std::printf("training %s from scratch on %s (%d thread%s per device, allreduce %s): %lld train / %lld test images "
              "from %s, batch %lld, lr %g, %d epochs\n",
              flags.model.c_str(), device_list_str(flags.config.devices).c_str(), cpu_threads,
              cpu_threads == 1 ? "" : "s", flags.allreduce.c_str(), static_cast<long long>(train_data.size()),
              static_cast<long long>(test_data.size()), flags.data_dir.c_str(),
              static_cast<long long>(flags.config.batch_size), flags.config.lr, flags.config.epochs);
  std::fflush(stdout);
  const train::TrainSummary summary = train::train_lenet_from_scratch(
      train_data, test_data, flags.config, [&](const train::EpochStats& s) {
        std::printf("epoch %d/%d: loss %.3f, train acc %.3f, test acc %.3f, %.1f sec, %.0f examples/sec\n", s.epoch,
                    flags.config.epochs, s.train_loss, s.train_acc, s.test_acc, s.seconds, s.examples_per_sec);
        std::fflush(stdout);
      });
  std::printf("test acc: %.2f, %.1f sec/epoch on %s\n", summary.test_acc, summary.sec_per_epoch,
              device_list_str(flags.config.devices).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dptrain: data-parallel training of convolutional networks on Fashion-MNIST"};
  app.require_subcommand(1);
  TrainFlags flags;
  CLI::App* train = app.add_subcommand("train", "Train a model and report test accuracy and time per epoch");
  add_train_flags(*train, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run_train(flags);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dptrain: error: %s\n", e.what());
    return 1;
  }
}
