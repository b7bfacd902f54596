// The concise API on several devices (src/dpt/parallel/data_parallel, src/dpt/train/
// train_concise): DataParallel + optim::SGD on N devices computes the same parameters as
// the plain module trained on one, with every replica identical bit for bit; BatchNorm's
// running statistics agree across replicas; count_correct counts what the plain module
// counts; and train() learns a task that a broken loop cannot.
//
// Runs under ThreadSanitizer too (scripts/test-tsan.sh: the label `parallel`): every
// device gets one core, so no OpenMP team (uninstrumented libgomp) is ever started.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dpt/data/idx_dataset.h"
#include "dpt/autograd/engine.h"
#include "dpt/autograd/node.h"
#include "dpt/core/device.h"
#include "dpt/core/random.h"
#include "dpt/core/tensor.h"
#include "dpt/data/idx_dataset.h"
#include "dpt/data/loader.h"
#include "dpt/nn/init.h"
#include "dpt/nn/layers.h"
#include "dpt/nn/models.h"
#include "dpt/ops/ops.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/replicate.h"
#include "dpt/train/train_concise.h"
#include "test_support.h"

using dpt::Device;
using dpt::Shape;
using dpt::Tensor;
using dpt::parallel::DataParallel;
namespace nn = dpt::nn;
namespace optim = dpt::optim;

namespace {
using dpt::parallel::cpu_devices;
using dpt::testing_support::kThreadSanitizer;
using dpt::testing_support::random_images;
using dpt::testing_support::small_bn_net;

// One core per device: no OpenMP team (TSan-clean), and N devices never oversubscribe.
DataParallel make_parallel(std::unique_ptr<nn::Module> net, int devices, const std::string& allreduce = "ring") {
  return DataParallel(std::move(net), cpu_devices(devices), allreduce, devices);
}

std::vector<std::vector<float>> snapshot(const std::vector<Tensor>& tensors) {
  std::vector<std::vector<float>> values;
  for (const Tensor& t : tensors) values.push_back(t.to_vector());
  return values;
}

std::unique_ptr<nn::Module> kaiming_lenet(uint64_t seed) {
  auto net = nn::lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  nn::init_weights(*net, nn::Init::kaiming, seed);
  return net;
}

// Every replica must hold exactly the same bits: they applied the same reduced gradient
// with the same optimizer arithmetic.
void expect_replicas_bit_identical(const std::vector<std::vector<Tensor>>& replicas, const char* what) {
  for (size_t r = 1; r < replicas.size(); ++r) {
    ASSERT_EQ(replicas[r].size(), replicas[0].size());
    for (size_t i = 0; i < replicas[0].size(); ++i) {
      EXPECT_EQ(std::memcmp(replicas[r][i].data<float>(), replicas[0][i].data<float>(), replicas[0][i].bytes()), 0)
          << what << " " << i << " (" << replicas[0][i].name() << "): replica " << r << " differs from replica 0";
      EXPECT_NE(&replicas[r][i].storage(), &replicas[0][i].storage()) << "replicas share storage";
    }
  }
}

// Parameters trained on N devices against the plain module's. The two computations differ
// only in float rounding: the reference takes the mean loss's gradient of the whole batch
// (oneDNN scales by 1/B inside the backward), DataParallel sums each shard's gradient,
// adds the N partial sums in the allreduce and then scales by 1/B. Each reordering
// perturbs a gradient by a few ulps of the magnitudes summed: a relative ~1e-6 of the
// update. Over K = 3 momentum steps these perturbations add up (momentum re-applies the
// earlier ones: 1 + 1.9 + 2.71 times a step's error at most) and feed back weakly through
// the next gradients, so we allow, per element,
//     |p_N - p_ref| <= 1e-6 + 1e-5 |p_ref| + 2e-3 max|p_ref - p_0|
// with max|p_ref - p_0| the tensor's largest total movement over the K steps. On this
// machine the worst difference is 0.34% of that bound. A step scaled by 12/13 (dividing by
// 13 instead of 12: the smallest plausible mistake) fails every tensor at every step, by up
// to 100 times the bound; a shard left out or counted twice, or the shard size instead of
// the global batch, change the step by a third or more. expect_moved checks that the
// steps are not a no-op.
void expect_close_to_reference(const std::vector<Tensor>& got, const std::vector<std::vector<float>>& reference,
                               const std::vector<std::vector<float>>& initial, double* worst_ratio) {
  ASSERT_EQ(got.size(), reference.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<float> values = got[i].to_vector();
    ASSERT_EQ(values.size(), reference[i].size());
    double max_step = 0;
    for (size_t k = 0; k < values.size(); ++k) {
      max_step = std::max(max_step, std::fabs(static_cast<double>(reference[i][k]) - initial[i][k]));
    }
    size_t bad = 0;
    for (size_t k = 0; k < values.size(); ++k) {
      const double diff = std::fabs(static_cast<double>(values[k]) - reference[i][k]);
      const double tolerance = 1e-6 + 1e-5 * std::fabs(reference[i][k]) + 2e-3 * max_step;
      *worst_ratio = std::max(*worst_ratio, diff / tolerance);
      if (diff > tolerance && ++bad <= 3) {
        ADD_FAILURE() << got[i].name() << "[" << k << "]: " << values[k] << " vs plain " << reference[i][k]
                      << " (total movement " << max_step << ")";
      }
    }
    EXPECT_EQ(bad, 0u) << "parameter " << i << " (" << got[i].name() << ")";
  }
}

void expect_moved(const std::vector<std::vector<float>>& after, const std::vector<std::vector<float>>& before) {
  for (size_t i = 0; i < after.size(); ++i) {
    double max_step = 0, max_value = 0;
    for (size_t k = 0; k < after[i].size(); ++k) {
      max_step = std::max(max_step, std::fabs(static_cast<double>(after[i][k]) - before[i][k]));
      max_value = std::max(max_value, std::fabs(static_cast<double>(after[i][k])));
    }
    EXPECT_GT(max_step, 1e-4 * max_value + 1e-6) << "parameter " << i << " did not move";
  }
}

// ---------------------------------------------------------------------------------------
// N devices compute what one plain module computes.

class ConciseEquivalenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ConciseEquivalenceTest, ThreeMomentumStepsOnNDevicesMatchThePlainModule) {
  constexpr int kSteps = 3;
  const optim::SgdOptions options{/*lr=*/0.1f, /*momentum=*/0.9f, /*weight_decay=*/0.0f};
  const std::unique_ptr<nn::Module> master = kaiming_lenet(/*seed=*/2024);
  const std::vector<std::vector<float>> initial = snapshot(master->parameters());
  double worst_ratio = 0;

  for (const int64_t batch : {12, 13}) {  // 12: even shards over 1..3 devices; 13: uneven
    std::vector<std::pair<Tensor, Tensor>> batches;
    for (int s = 0; s < kSteps; ++s) batches.push_back(random_images(batch, 100 * batch + s));

    // The plain reference: net(X), the mean cross-entropy, backward, SGD.
    const std::unique_ptr<nn::Module> plain = master->clone();
    optim::SGD plain_sgd(plain->parameters(), options);
    std::vector<std::vector<std::vector<float>>> reference;  // after each step
    std::vector<double> reference_loss;
    for (const auto& [X, y] : batches) {
      plain_sgd.zero_grad();
      const Tensor loss = dpt::ops::cross_entropy((*plain)(X), y, dpt::ops::Reduction::mean);
      dpt::autograd::backward(loss);
      plain_sgd.step();
      reference_loss.push_back(loss.item());
      reference.push_back(snapshot(plain->parameters()));
    }
    expect_moved(reference.back(), initial);
    EXPECT_EQ(snapshot(master->parameters()), initial) << "the clone trained the master's tensors";

    for (const int devices : {1, 2, 3}) {
      SCOPED_TRACE(GetParam() + ", batch " + std::to_string(batch) + " over " + std::to_string(devices) + " devices");
      DataParallel net = make_parallel(master->clone(), devices, GetParam());
      ASSERT_EQ(net.devices(), cpu_devices(devices));
      optim::SGD sgd(net.replica_parameters(), options);
      std::vector<std::vector<float>> previous = initial;
      for (int s = 0; s < kSteps; ++s) {
        SCOPED_TRACE("step " + std::to_string(s + 1));
        sgd.zero_grad();
        const dpt::parallel::StepResult result = net.forward_backward(batches[s].first, batches[s].second);
        EXPECT_EQ(result.examples, batch);
        // The summed loss over the shards is B times the plain mean loss.
        EXPECT_NEAR(result.loss_sum, reference_loss[s] * static_cast<double>(batch), 1e-4 * result.loss_sum);
        // Gradients after the allreduce are those of the mean loss, and equal on every replica.
        const std::vector<std::vector<Tensor>> replicas = net.replica_parameters();
        std::vector<std::vector<Tensor>> grads(static_cast<size_t>(devices));
        for (int r = 0; r < devices; ++r) {
          for (const Tensor& p : replicas[r]) {
            ASSERT_TRUE(p.grad().defined());
            grads[r].push_back(p.grad());
          }
        }
        expect_replicas_bit_identical(grads, "gradient");
        sgd.step();

        expect_replicas_bit_identical(net.replica_parameters(), "parameter");
        std::vector<std::vector<Tensor>> velocities(static_cast<size_t>(devices));
        for (int r = 0; r < devices; ++r) {
          for (size_t i = 0; i < initial.size(); ++i) velocities[r].push_back(sgd.state(0, r, i));
        }
        expect_replicas_bit_identical(velocities, "momentum buffer");
        const std::vector<std::vector<float>> now = snapshot(net.replica_parameters()[0]);
        expect_moved(now, previous);
        expect_close_to_reference(net.replica_parameters()[0], reference[s], initial, &worst_ratio);
        previous = now;
      }
      // The wrapped module is replica 0, and it is what was trained.
      EXPECT_EQ(snapshot(net.module().parameters()), snapshot(net.replica_parameters()[0]));
    }
  }
  RecordProperty("worst_diff_over_tolerance", std::to_string(worst_ratio));
  std::printf("worst |p_N - p_plain| / tolerance: %.4f\n", worst_ratio);
}

INSTANTIATE_TEST_SUITE_P(Allreduce, ConciseEquivalenceTest, ::testing::Values("naive", "ring"),
                         [](const auto& info) { return std::string(info.param); });

// ---------------------------------------------------------------------------------------
// BatchNorm across replicas.

// A dataset of `n` side x side images with random labels; each image is a 4 x 4 grid of
// blocks of random brightness (plain pixel noise would look alike to an averaging LeNet).
dpt::data::InMemoryDataset random_dataset(int64_t n, int64_t side, uint64_t seed) {
  dpt::Rng rng(seed);
  dpt::data::InMemoryDataset data;
  data.rows = data.cols = side;
  data.pixels.resize(static_cast<size_t>(n * side * side));
  for (int64_t i = 0; i < n; ++i) {
    uint8_t block[4][4];
    for (auto& row : block)
      for (uint8_t& b : row) b = static_cast<uint8_t>(rng() % 256);
    for (int64_t r = 0; r < side; ++r)
      for (int64_t c = 0; c < side; ++c) {
        data.pixels[static_cast<size_t>((i * side + r) * side + c)] = block[r * 4 / side][c * 4 / side];
      }
    data.labels.push_back(static_cast<int64_t>(rng() % 10));
  }
  return data;
}

// All of `data` as one batch, exactly as the loader makes it (pixel / 255).
dpt::data::Batch whole(const dpt::data::InMemoryDataset& data) {
  dpt::data::BatchLoader loader(data, data.size(), /*shuffle=*/false, 0);
  dpt::data::Batch batch;
  EXPECT_TRUE(loader.next(batch));
  return batch;
}

TEST(DataParallelBatchNorm, RunningStatsAreTheReplicaAverageAndEvaluationAgrees) {
  const std::unique_ptr<nn::Module> master = small_bn_net();
  const auto [X, y] = random_images(10, 31, 8);  // shards of 5 and 5 images of 8x8

  // What each replica's shard gives on its own: a train-mode forward of a copy.
  const std::vector<dpt::parallel::Shard> shards = dpt::parallel::split_batch(X, y, cpu_devices(2));
  std::vector<std::vector<std::vector<float>>> per_shard;
  for (const auto& shard : shards) {
    const std::unique_ptr<nn::Module> copy = master->clone();
    dpt::autograd::NoGradGuard no_grad;
    (void)(*copy)(shard.X);
    per_shard.push_back(snapshot(copy->buffers()));
  }
  ASSERT_EQ(per_shard[0].size(), 2u);
  // The two shards really see different statistics (else the average would prove nothing).
  EXPECT_NE(per_shard[0][0], per_shard[1][0]);

  DataParallel net = make_parallel(master->clone(), 2);
  optim::SGD sgd(net.replica_parameters(), {0.1f, 0.9f, 0.0f});
  sgd.zero_grad();
  (void)net.forward_backward(X, y);
  sgd.step();

  std::vector<std::vector<Tensor>> buffers{net.replica(0).buffers(), net.replica(1).buffers()};
  expect_replicas_bit_identical(buffers, "buffer");
  expect_replicas_bit_identical(net.replica_parameters(), "parameter");
  for (size_t b = 0; b < 2; ++b) {
    const std::vector<float> got = buffers[0][b].to_vector();
    for (size_t c = 0; c < got.size(); ++c) {
      const double expected = 0.5 * (static_cast<double>(per_shard[0][b][c]) + per_shard[1][b][c]);
      EXPECT_NEAR(got[c], expected, 1e-6 * std::fabs(expected) + 1e-7) << "buffer " << b << " channel " << c;
    }
    // And they moved away from 0 (mean) / 1 (var).
    EXPECT_NE(got, std::vector<float>(got.size(), b == 0 ? 0.0f : 1.0f));
  }

  // Eval: the replicas hold the same state, so each gives the same logits on the same
  // images, and DataParallel's count (each replica judging its own shard) is their count.
  const dpt::data::InMemoryDataset test = random_dataset(20, 8, 77);
  const dpt::data::Batch all = whole(test);
  std::vector<std::vector<float>> logits;
  for (size_t r = 0; r < 2; ++r) {
    const std::unique_ptr<nn::Module> copy = net.replica(r).clone();
    copy->eval();
    dpt::autograd::NoGradGuard no_grad;
    logits.push_back((*copy)(all.images).to_vector());
  }
  EXPECT_EQ(logits[0], logits[1]);
  const std::unique_ptr<nn::Module> judge = net.replica(1).clone();
  judge->eval();
  int64_t expected_correct = 0;
  {
    dpt::autograd::NoGradGuard no_grad;
    expected_correct = dpt::ops::count_correct((*judge)(all.images), all.labels);
  }
  const std::vector<std::vector<float>> buffers_before = snapshot(net.replica(0).buffers());
  net.eval();
  EXPECT_EQ(net.count_correct(test, 6), expected_correct);  // batches 6, 6, 6, 2
  // Evaluation does not touch the running statistics.
  EXPECT_EQ(snapshot(net.replica(0).buffers()), buffers_before);
  EXPECT_EQ(snapshot(net.replica(1).buffers()), buffers_before);
}

// A batch smaller than the number of devices (an epoch's last) runs on the first devices
// only; the idle one joins the collectives adding nothing. With 2 examples on 3 devices the
// step is then exactly the 2-device step: the same shards, and sums that only add zeros.
TEST(DataParallelPartialBatch, ABatchSmallerThanTheDevicesIsTheStepOfTheFirstDevices) {
  for (const char* algorithm : {"naive", "ring"}) {
    SCOPED_TRACE(algorithm);
    const std::unique_ptr<nn::Module> master = small_bn_net();
    const auto [X, y] = random_images(2, 41, 8);
    DataParallel two = make_parallel(master->clone(), 2, algorithm);
    DataParallel three = make_parallel(master->clone(), 3, algorithm);
    // Stale gradients on the idle replica must not leak into the sum.
    const std::vector<std::vector<Tensor>> params3 = three.replica_parameters();
    for (const Tensor& p : params3[2]) p.set_grad(Tensor::full(p.shape(), 1.0f));
    const dpt::parallel::StepResult a = two.forward_backward(X, y);
    const dpt::parallel::StepResult b = three.forward_backward(X, y);
    EXPECT_EQ(b.examples, 2);
    EXPECT_EQ(b.loss_sum, a.loss_sum);
    EXPECT_EQ(b.correct, a.correct);
    const auto grads_of = [](const std::vector<Tensor>& params) {
      std::vector<Tensor> grads;
      for (const Tensor& p : params) grads.push_back(p.grad());
      return grads;
    };
    const std::vector<Tensor> grads2 = grads_of(two.replica_parameters()[0]);
    for (int r = 0; r < 3; ++r) {
      SCOPED_TRACE("replica " + std::to_string(r));
      expect_replicas_bit_identical({grads2, grads_of(params3[r])}, "gradient");
      expect_replicas_bit_identical({two.replica(0).buffers(), three.replica(r).buffers()}, "buffer");
    }
    // The running mean moved (away from 0): the average was not diluted by the idle replica.
    EXPECT_NE(three.replica(2).buffers()[0].to_vector(), std::vector<float>(4, 0.0f));
  }
}

// ---------------------------------------------------------------------------------------
// count_correct.

TEST(DataParallelCountCorrect, CountsWhatThePlainModuleCounts) {
  // 23 images; the plain module's own predictions decide the labels: right for the even
  // examples, wrong (prediction + 1) for the odd ones, so exactly 12 are correct.
  dpt::data::InMemoryDataset data = random_dataset(23, 28, 5);
  const std::unique_ptr<nn::Module> master = kaiming_lenet(3);
  master->eval();
  const dpt::data::Batch all = whole(data);
  std::vector<int64_t> predicted;
  {
    dpt::autograd::NoGradGuard no_grad;
    const Tensor p = dpt::ops::argmax((*master)(all.images));
    predicted.assign(p.data<int64_t>(), p.data<int64_t>() + p.numel());
  }
  // Guard against a degenerate model that predicts one class for everything.
  EXPECT_GT(std::set<int64_t>(predicted.begin(), predicted.end()).size(), 1u);
  for (size_t i = 0; i < predicted.size(); ++i) data.labels[i] = i % 2 == 0 ? predicted[i] : (predicted[i] + 1) % 10;

  for (const int devices : {1, 2, 3}) {
    // Batch sizes with a last batch smaller than a full one, including (for 2 and 3
    // devices) a last batch smaller than the number of devices: 23 = 2 * 11 + 1.
    for (const int64_t batch_size : {5, 11, 23, 64}) {
      SCOPED_TRACE(std::to_string(devices) + " devices, batch " + std::to_string(batch_size));
      DataParallel net = make_parallel(master->clone(), devices);
      net.eval();
      EXPECT_EQ(net.count_correct(data, batch_size), 12);
    }
  }
}

// ---------------------------------------------------------------------------------------
// train(): a task the model must learn.

// n images, half dark (pixels 0..79) with label 0, half bright (176..255) with label 1,
// interleaved; separable by brightness alone.
dpt::data::InMemoryDataset brightness_dataset(int64_t n, uint64_t seed) {
  dpt::Rng rng(seed);
  dpt::data::InMemoryDataset data;
  data.pixels.resize(static_cast<size_t>(n * 28 * 28));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = i % 2;
    data.labels.push_back(label);
    for (int64_t k = 0; k < 28 * 28; ++k) {
      data.pixels[static_cast<size_t>(i * 28 * 28 + k)] = static_cast<uint8_t>((label ? 176 : 0) + rng() % 80);
    }
  }
  return data;
}

TEST(ConciseTrain, LearnsASeparableTaskOnTwoDevices) {
  // 8 epochs of 4 steps. Uncentred inputs make the first epochs bumpy (lr 0.02-0.05 with
  // momentum 0.9 oscillates for several epochs); lr 0.05 with momentum 0.5 reaches test
  // accuracy 1 by epoch 2-3 for every init seed tried (1-8), with the last epoch's loss
  // 0.002-0.36, always under a quarter of the first's.
  constexpr int kEpochs = 8;
  const dpt::data::InMemoryDataset train_data = brightness_dataset(64, 1);
  const dpt::data::InMemoryDataset test_data = brightness_dataset(32, 2);
  DataParallel net = make_parallel(kaiming_lenet(7), 2);
  optim::SGD sgd(net.replica_parameters(), {/*lr=*/0.05f, /*momentum=*/0.5f, /*weight_decay=*/0.0f});
  dpt::train::TrainOptions config;
  config.epochs = kEpochs;
  config.batch_size = 16;
  config.seed = 3;
  int epoch_calls = 0, step_calls = 0;
  const dpt::train::TrainHistory history = dpt::train::train(
      net, sgd, train_data, test_data, config, [&](const dpt::train::EpochStats&) { ++epoch_calls; },
      [&](int, int64_t step, int64_t steps, double loss, double acc) {
        ++step_calls;
        EXPECT_EQ(steps, 4);
        EXPECT_GE(step, 1);
        EXPECT_LE(step, steps);
        EXPECT_TRUE(std::isfinite(loss));
        EXPECT_GE(acc, 0.0);
        EXPECT_LE(acc, 1.0);
      });
  ASSERT_EQ(history.epochs.size(), static_cast<size_t>(kEpochs));
  EXPECT_EQ(epoch_calls, kEpochs);
  EXPECT_EQ(step_calls, kEpochs * 4);  // 64 / 16 steps per epoch
  for (size_t e = 0; e < history.epochs.size(); ++e) {
    const dpt::train::EpochStats& stats = history.epochs[e];
    SCOPED_TRACE("epoch " + std::to_string(stats.epoch));
    EXPECT_EQ(stats.epoch, static_cast<int>(e) + 1);
    EXPECT_GT(stats.seconds, 0.0);
    EXPECT_GT(stats.examples_per_sec, 0.0);
    EXPECT_NEAR(stats.examples_per_sec, 64.0 / stats.seconds, 1e-6 * stats.examples_per_sec);
    EXPECT_TRUE(std::isfinite(stats.train_loss));
    EXPECT_GE(stats.train_acc, 0.0);
    EXPECT_LE(stats.train_acc, 1.0);
    // Accuracies are counts over 64 / 32 examples.
    EXPECT_DOUBLE_EQ(stats.train_acc * 64, std::round(stats.train_acc * 64));
    EXPECT_DOUBLE_EQ(stats.test_acc * 32, std::round(stats.test_acc * 32));
  }
  // The loss must fall (from ~1.5: ten outputs, two of them used) and the task be learnt.
  EXPECT_LT(history.epochs.back().train_loss, 0.5 * history.epochs.front().train_loss);
  EXPECT_LT(history.epochs.back().train_loss, 0.1);
  EXPECT_GT(history.epochs.back().train_acc, 0.9);
  EXPECT_GT(history.epochs.back().test_acc, 0.9);
  EXPECT_GT(history.examples_per_sec, 0.0);
  // train() leaves the model in training mode and the replicas equal.
  EXPECT_TRUE(net.module().is_training());
  expect_replicas_bit_identical(net.replica_parameters(), "parameter");
}

TEST(ConciseTrain, RejectsNoEpochsAndStopsOnDivergence) {
  const dpt::data::InMemoryDataset data = brightness_dataset(8, 4);
  dpt::train::TrainOptions config;
  config.batch_size = 4;
  config.epochs = 0;
  {
    DataParallel net = make_parallel(kaiming_lenet(1), 2);
    optim::SGD sgd(net.replica_parameters(), {0.1f, 0.0f, 0.0f});
    EXPECT_CONFIG_ERROR(dpt::train::train(net, sgd, data, data, config), "epochs", "`epochs` must be at least 1, got 0");
  }
  // A NaN in the model (as a too-large lr eventually produces) makes the first loss NaN:
  // train() must stop there, naming the step, instead of training on garbage.
  std::unique_ptr<nn::Module> broken = kaiming_lenet(1);
  broken->parameters().back().copy_from(Tensor::full({10}, NAN));
  DataParallel net = make_parallel(std::move(broken), 2);
  optim::SGD sgd(net.replica_parameters(), {0.25f, 0.0f, 0.0f});
  config.epochs = 3;
  int epochs_done = 0;
  try {
    dpt::train::train(net, sgd, data, data, config, [&](const dpt::train::EpochStats&) { ++epochs_done; });
    ADD_FAILURE() << "training on a NaN loss did not stop";
  } catch (const dpt::train::DivergenceError& e) {
    EXPECT_STREQ(e.what(),
                 "training diverged in epoch 1, step 1: the loss is nan. Lower `lr` (now 0.25), check the "
                 "input data, or pass `on_nan` skip to drop such steps and go on");
  }
  EXPECT_EQ(epochs_done, 0);
}

TEST(DataParallelPartialBatch, TrainCopesWithALastBatchSmallerThanTheDevices) {
  // 9 examples in batches of 4 on 3 devices: the last batch has 1 example, and so does
  // the last test batch.
  const dpt::data::InMemoryDataset data = brightness_dataset(9, 8);
  DataParallel net = make_parallel(kaiming_lenet(2), 3);
  optim::SGD sgd(net.replica_parameters(), {0.01f, 0.0f, 0.0f});
  dpt::train::TrainOptions config;
  config.epochs = 2;
  config.batch_size = 4;
  int64_t last_steps = 0;
  const dpt::train::TrainHistory history = dpt::train::train(
      net, sgd, data, data, config, {}, [&](int, int64_t, int64_t steps, double, double) { last_steps = steps; });
  EXPECT_EQ(last_steps, 3);
  ASSERT_EQ(history.epochs.size(), 2u);
  for (const auto& stats : history.epochs) {
    EXPECT_TRUE(std::isfinite(stats.train_loss));
    EXPECT_NEAR(stats.examples_per_sec * stats.seconds, 9.0, 1e-6);
  }
  expect_replicas_bit_identical(net.replica_parameters(), "parameter");
}

}  // namespace
