// Reliability of the training loop on the real Fashion-MNIST: a run interrupted by a stop
// request and resumed from its checkpoint ends with the same parameters, bit for bit, as
// an uninterrupted run; a checkpoint from N devices loads on M; the divergence guard
// stops on (or skips) a NaN step, naming the step and the layer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <filesystem>

#include "dpt/data/idx_dataset.h"
#include "dpt/checkpoint/checkpoint_dir.h"
#include "dpt/data/idx_dataset.h"
#include "dpt/nn/init.h"
#include "dpt/nn/models.h"
#include "dpt/parallel/device_list.h"
#include "dpt/train/config.h"
#include "dpt/train/train_concise.h"
#include "dpt/train/train_from_scratch.h"
#include "test_support.h"

using namespace dpt;
using dpt::testing_support::error_of;
using testing::HasSubstr;

namespace {

// 512 training images in batches of 64: 8 steps per epoch; the first 256 test images.
const data::InMemoryDataset& train_subset() {
  static const data::InMemoryDataset d = data::take_first(data::load_fashion_mnist(DPT_DATA_DIR, data::Split::train), 512);
  return d;
}
const data::InMemoryDataset& test_subset() {
  static const data::InMemoryDataset d = data::take_first(data::load_fashion_mnist(DPT_DATA_DIR, data::Split::test), 256);
  return d;
}

std::filesystem::path fresh_dir(const std::string& name) {
  return dpt::testing_support::unique_temp_dir("dpt_resume_test_" + name);
}

// A stop request (as SIGTERM would make) after `step` global steps.
std::function<int()> stop_after(int64_t step) {
  auto steps = std::make_shared<int64_t>(0);
  return [steps, step] { return ++*steps >= step ? SIGTERM : 0; };
}

train::ScratchConfig scratch_config(int devices, const std::filesystem::path& dir) {
  train::ScratchConfig config;
  config.training.epochs = 2;
  config.training.batch_size = 64;
  config.lr = 0.5f;
  config.training.seed = 5;
  config.devices = parallel::cpu_devices(devices);
  config.training.run.checkpoint_dir = dir.string();
  config.training.run.checkpoint_every = 3;
  return config;
}

void expect_bitwise_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<float> x = a[i].to_vector(), y = b[i].to_vector();
    ASSERT_EQ(x.size(), y.size());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << "parameter " << a[i].name();
  }
}

}  // namespace

TEST(ScratchResume, InterruptedAndResumedEqualsUninterruptedBitForBit) {
  const train::TrainSummary whole =
      train::train_lenet_from_scratch(train_subset(), test_subset(), scratch_config(2, fresh_dir("whole")));

  // Stop after step 5 (mid epoch 1, between the checkpoints at 3 and 6): the stop itself
  // writes the checkpoint, with the data position and the epoch's running sums.
  const auto dir = fresh_dir("parts");
  train::ScratchConfig first = scratch_config(2, dir);
  first.training.run.stop_signal = stop_after(5);
  const std::string message = error_of<train::TrainingInterrupted>(
      [&] { train::train_lenet_from_scratch(train_subset(), test_subset(), first); });
  EXPECT_THAT(message, HasSubstr("stopped by SIGTERM after step 5 (epoch 1, batch 5); checkpoint written to"));
  EXPECT_THAT(message, HasSubstr("step-000000005.ckpt, rerun with `resume` to continue"));

  train::ScratchConfig second = scratch_config(2, dir);
  second.training.run.resume = true;
  train::ResumeInfo info;
  second.training.run.on_resume = [&](const train::ResumeInfo& i) { info = i; };
  const train::TrainSummary resumed = train::train_lenet_from_scratch(train_subset(), test_subset(), second);
  EXPECT_EQ(info.position.global_step, 5);
  EXPECT_EQ(info.position.batch_offset, 5);
  expect_bitwise_equal(resumed.params, whole.params);
  ASSERT_EQ(resumed.history.size(), 2u);
  EXPECT_EQ(resumed.history[0].train_loss, whole.history[0].train_loss) << "the epoch's sums survive the stop";
  EXPECT_EQ(resumed.history[1].test_acc, whole.history[1].test_acc);
}

TEST(ScratchResume, ACheckpointFromTwoDevicesLoadsOnOne) {
  const auto dir = fresh_dir("n_to_m");
  train::ScratchConfig on_two = scratch_config(2, dir);
  on_two.training.epochs = 1;
  const train::TrainSummary two = train::train_lenet_from_scratch(train_subset(), test_subset(), on_two);

  // Resuming with --epochs 1 on one device trains nothing more: the loaded parameters
  // are exactly those the two devices ended with.
  train::ScratchConfig on_one = scratch_config(1, dir);
  on_one.training.epochs = 1;
  on_one.training.run.resume = true;
  train::ResumeInfo info;
  on_one.training.run.on_resume = [&](const train::ResumeInfo& i) { info = i; };
  const train::TrainSummary one = train::train_lenet_from_scratch(train_subset(), test_subset(), on_one);
  EXPECT_EQ(info.written_on, (std::vector<std::string>{"cpu:0", "cpu:1"}));
  expect_bitwise_equal(one.params, two.params);
  EXPECT_EQ(one.test_acc, two.test_acc);

  // And training on from there on one device works like any run.
  on_one.training.epochs = 2;
  const train::TrainSummary more = train::train_lenet_from_scratch(train_subset(), test_subset(), on_one);
  ASSERT_EQ(more.history.size(), 2u);
  EXPECT_EQ(more.history[0].test_acc, two.test_acc) << "the first epoch is the two devices' one";
  EXPECT_TRUE(std::isfinite(more.history[1].train_loss));
  EXPECT_NE(more.params[0].to_vector(), two.params[0].to_vector()) << "the second epoch trained";
}

TEST(ScratchResume, RefusesACheckpointOfAnotherRun) {
  const auto dir = fresh_dir("other_run");
  train::ScratchConfig config = scratch_config(1, dir);
  config.training.epochs = 1;
  train::train_lenet_from_scratch(train_subset(), test_subset(), config);
  config.training.run.resume = true;
  config.training.batch_size = 32;
  EXPECT_THAT(error_of<checkpoint::CheckpointError>(
                  [&] { train::train_lenet_from_scratch(train_subset(), test_subset(), config); }),
              HasSubstr("it was written with `batch_size` 64, this run has 32"));
}

TEST(ScratchResume, StopWithoutACheckpointDirSaysNothingWasSaved) {
  train::ScratchConfig config = scratch_config(1, "");
  config.training.run.checkpoint_every = 0;
  config.training.run.stop_signal = stop_after(2);
  EXPECT_EQ(error_of<train::TrainingInterrupted>(
                [&] { train::train_lenet_from_scratch(train_subset(), test_subset(), config); }),
            "stopped by SIGTERM after step 2 (epoch 1, batch 2); no `checkpoint_dir` was given, so nothing was "
            "saved");
}

TEST(RunOptions, NamesTheFieldsThatCannotWork) {
  train::RunOptions run;
  run.resume = true;
  EXPECT_CONFIG_ERROR(train::validate(run), "resume", "`resume` needs `checkpoint_dir`");
  run = {};
  run.checkpoint_every = -1;
  EXPECT_CONFIG_ERROR(train::validate(run), "checkpoint_every", "`checkpoint_every` must be >= 0, got -1");
  EXPECT_CONFIG_ERROR(train::parse_on_nan("ignore"), "on_nan", "`on_nan` must be stop or skip, got 'ignore'");
}

namespace {

struct ConciseRun {
  std::unique_ptr<parallel::DataParallel> net;
  std::unique_ptr<optim::Optimizer> optimizer;
};

ConciseRun concise_lenet(int devices, const std::string& optimizer = "sgd") {
  std::unique_ptr<nn::Module> module = nn::lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  nn::init_weights(*module, nn::Init::kaiming, 9);
  ConciseRun run;
  run.net = std::make_unique<parallel::DataParallel>(std::move(module), parallel::cpu_devices(devices));
  optim::OptimizerSettings settings{0.05f, 0.9f, false, 1e-4f};
  if (optimizer != "sgd") settings = {.lr = 2e-3f, .weight_decay = 0.01f};
  run.optimizer = optim::make_optimizer(optimizer, run.net->replica_parameters(), settings);
  return run;
}

train::TrainOptions concise_config(const std::filesystem::path& dir) {
  train::TrainOptions config;
  config.epochs = 2;
  config.batch_size = 64;
  config.seed = 2;
  config.model = "lenet";
  config.run.checkpoint_dir = dir.string();
  config.run.checkpoint_every = 4;
  return config;
}

}  // namespace

TEST(ConciseResume, MomentumAndPositionSurviveAStopBitForBit) {
  ConciseRun whole = concise_lenet(2);
  const train::TrainHistory whole_history =
      train::train(*whole.net, *whole.optimizer, train_subset(), test_subset(), concise_config(fresh_dir("c_whole")));

  ConciseRun first = concise_lenet(2);
  train::TrainOptions config = concise_config(fresh_dir("c_parts"));
  config.run.stop_signal = stop_after(11);  // in epoch 2, after the momentum has built up
  EXPECT_THROW(train::train(*first.net, *first.optimizer, train_subset(), test_subset(), config),
               train::TrainingInterrupted);

  ConciseRun second = concise_lenet(2);  // fresh weights: everything must come from the checkpoint
  config.run.stop_signal = {};
  config.run.resume = true;
  const train::TrainHistory resumed =
      train::train(*second.net, *second.optimizer, train_subset(), test_subset(), config);
  for (size_t r = 0; r < 2; ++r) {
    expect_bitwise_equal(second.net->replica(r).parameters(), whole.net->replica(r).parameters());
  }
  ASSERT_EQ(resumed.epochs.size(), 2u);
  EXPECT_EQ(resumed.epochs[1].train_loss, whole_history.epochs[1].train_loss);
  EXPECT_EQ(resumed.epochs[1].test_acc, whole_history.epochs[1].test_acc);
}

// Adam's moments and its step count (its bias correction) come back from the checkpoint.
TEST(ConciseResume, AdamWStateSurvivesAStopBitForBit) {
  ConciseRun whole = concise_lenet(2, "adamw");
  train::train(*whole.net, *whole.optimizer, train_subset(), test_subset(), concise_config(fresh_dir("w_whole")));

  ConciseRun first = concise_lenet(2, "adamw");
  train::TrainOptions config = concise_config(fresh_dir("w_parts"));
  config.run.stop_signal = stop_after(11);
  EXPECT_THROW(train::train(*first.net, *first.optimizer, train_subset(), test_subset(), config),
               train::TrainingInterrupted);
  ConciseRun second = concise_lenet(2, "adamw");
  config.run.stop_signal = {};
  config.run.resume = true;
  train::train(*second.net, *second.optimizer, train_subset(), test_subset(), config);
  EXPECT_EQ(second.optimizer->steps(), whole.optimizer->steps());
  for (size_t r = 0; r < 2; ++r) {
    expect_bitwise_equal(second.net->replica(r).parameters(), whole.net->replica(r).parameters());
  }

  ConciseRun other = concise_lenet(2, "adam");  // the checkpoint is AdamW's
  EXPECT_THAT(error_of<checkpoint::CheckpointError>(
                  [&] { train::train(*other.net, *other.optimizer, train_subset(), test_subset(), config); }),
              HasSubstr("was written with optimizer adamw, this run uses adam"));
}

TEST(ConciseResume, RefusesAScratchCheckpoint) {
  const auto dir = fresh_dir("c_mismatch");
  train::ScratchConfig scratch = scratch_config(1, dir);
  scratch.training.epochs = 1;
  train::train_lenet_from_scratch(train_subset(), test_subset(), scratch);
  ConciseRun run = concise_lenet(1);
  train::TrainOptions config = concise_config(dir);
  config.seed = 5;
  config.run.resume = true;
  EXPECT_THAT(error_of<checkpoint::CheckpointError>(
                  [&] { train::train(*run.net, *run.optimizer, train_subset(), test_subset(), config); }),
              HasSubstr("it was written with model lenet (scratch API), this run has lenet"));
}

TEST(DivergenceGuard, StopsNamingTheStepAndTheCause) {
  // A learning rate this large overflows the weights within a few steps.
  train::ScratchConfig config = scratch_config(2, "");
  config.training.run.checkpoint_every = 0;
  config.lr = 1e30f;
  const std::string error =
      error_of<train::DivergenceError>([&] { train::train_lenet_from_scratch(train_subset(), test_subset(), config); });
  EXPECT_THAT(error, testing::MatchesRegex("training diverged in epoch 1, step [0-9]+: the (loss is (nan|inf)|"
                                           "gradient of [Wb][1-4] holds [0-9]+ non-finite values?.*)\\. Lower `lr` "
                                           "\\(now 1e\\+30\\), check the input "
                                           "data, or pass `on_nan` skip to drop such steps and go on"));
}

TEST(DivergenceGuard, SkipDropsTheUpdateAndGoesOn) {
  // With lr 1e30 the first update blows the weights up and every later step is
  // non-finite: skipping drops those updates, so the parameters stay finite (if huge)
  // instead of turning into NaN, and the epoch completes.
  train::ScratchConfig config = scratch_config(2, "");
  config.training.run.checkpoint_every = 0;
  config.training.epochs = 1;
  config.lr = 1e30f;
  config.training.run.on_nan = train::OnNan::skip;
  std::vector<std::string> warnings;
  config.training.run.warn = [&](const std::string& w) { warnings.push_back(w); };
  const train::TrainSummary summary = train::train_lenet_from_scratch(train_subset(), test_subset(), config);
  EXPECT_GT(summary.skipped_steps, 0);
  EXPECT_LT(summary.skipped_steps, 8) << "the first step is finite and applied";
  ASSERT_EQ(warnings.size(), static_cast<size_t>(summary.skipped_steps));
  EXPECT_THAT(warnings[0], HasSubstr("(`on_nan` skip: update dropped)"));
  for (const Tensor& p : summary.params) {
    for (float v : p.to_vector()) ASSERT_TRUE(std::isfinite(v)) << p.name();
  }
}

TEST(DivergenceGuard, FindsTheFirstNonFiniteLayer) {
  const Tensor fine = Tensor::from_vector({1, 2}, {2});
  const Tensor bad = Tensor::from_vector({1, std::numeric_limits<float>::infinity(), NAN}, {3});
  EXPECT_EQ(train::find_non_finite(3.0, {{"W1", fine}, {"b1", fine}}), std::nullopt);
  EXPECT_EQ(train::find_non_finite(3.0, {{"W1", fine}, {"W2", bad}, {"b2", bad}}),
            "the gradient of W2 holds 2 non-finite values (the first is inf)");
  EXPECT_EQ(train::find_non_finite(NAN, {{"W1", fine}}), "the loss is nan");
}
