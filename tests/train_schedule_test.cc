// Learning-rate schedules and gradient accumulation in both APIs: N accumulated
// micro-batches make the update of one step on their concatenation (in float tolerance;
// in deterministic mode the same bits on 1 and 2 devices), and a run stopped and resumed
// under a schedule takes the uninterrupted run's learning rates (the same bits at the end).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "dpt/data/idx_dataset.h"
#include "dpt/checkpoint/checkpoint_dir.h"
#include "dpt/data/idx_dataset.h"
#include "dpt/nn/init.h"
#include "dpt/nn/lenet.h"
#include "dpt/nn/models.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "dpt/train/config.h"
#include "dpt/train/train_concise.h"
#include "dpt/train/train_from_scratch.h"
#include "test_support.h"

using namespace dpt;
using dpt::testing_support::error_of;
using dpt::testing_support::random_images;
using parallel::GradientSync;
using testing::HasSubstr;

namespace {

const data::InMemoryDataset& train_subset() {
  static const data::InMemoryDataset d = data::take_first(data::load_fashion_mnist(DPT_DATA_DIR, data::Split::train), 512);
  return d;
}
const data::InMemoryDataset& test_subset() {
  static const data::InMemoryDataset d = data::take_first(data::load_fashion_mnist(DPT_DATA_DIR, data::Split::test), 256);
  return d;
}

std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("dpt_schedule_test_" + name);
  std::filesystem::remove_all(dir);
  return dir;
}

std::function<int()> stop_after(int64_t step) {
  auto steps = std::make_shared<int64_t>(0);
  return [steps, step] { return ++*steps >= step ? SIGTERM : 0; };
}

// Rows [begin, begin + rows) of (X, y) as a loader's batch.
data::Batch rows_of(const Tensor& X, const Tensor& y, int64_t begin, int64_t rows) {
  const int64_t per_row = X.numel() / X.dim(0);
  const std::vector<float> x = X.to_vector();
  std::vector<int64_t> labels(y.data<int64_t>() + begin, y.data<int64_t>() + begin + rows);
  Shape shape = X.shape();
  shape[0] = rows;
  return {Tensor::from_vector(std::vector<float>(x.begin() + begin * per_row, x.begin() + (begin + rows) * per_row), shape),
          Tensor::from_labels(labels), rows};
}

void expect_close(const std::vector<Tensor>& a, const std::vector<Tensor>& b, float tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<float> x = a[i].to_vector(), y = b[i].to_vector();
    ASSERT_EQ(x.size(), y.size());
    float worst = 0;
    for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, std::abs(x[k] - y[k]));
    EXPECT_LE(worst, tolerance) << "parameter " << i << " (" << a[i].name() << ")";
  }
}

void expect_bitwise_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<float> x = a[i].to_vector(), y = b[i].to_vector();
    ASSERT_EQ(x.size(), y.size());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0) << "parameter " << i;
  }
}

bool differ(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].to_vector() != b[i].to_vector()) return true;
  }
  return false;
}

train::ScratchConfig scratch_config(int devices, int64_t chunk = 0) {
  train::ScratchConfig config;
  config.training.batch_size = 64;
  config.lr = 0.9f;
  config.devices = parallel::cpu_devices(devices);
  config.engine.deterministic_chunk = chunk;
  return config;
}

// The from-scratch LeNet after one update from micro-batches of `micro` examples of a
// fixed batch of 96 (micro = 96: one ordinary step).
std::vector<Tensor> scratch_after_one_update(int devices, int64_t micro, int64_t chunk = 0) {
  const auto [X, y] = random_images(96, 4);
  train::ScratchTrainer trainer(scratch_config(devices, chunk), nn::lenet_params(3, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses));
  for (int64_t at = 0; at < 96; at += micro) {
    const GradientSync sync = at + micro >= 96 ? GradientSync::now : GradientSync::later;
    trainer.compute_batch_gradients(rows_of(X, y, at, std::min<int64_t>(micro, 96 - at)), sync);
  }
  trainer.apply_update();
  return trainer.device_params()[0];
}

}  // namespace

TEST(Accumulate, ScratchMicroBatchesMakeTheUpdateOfOneBigStep) {
  const std::vector<Tensor> big = scratch_after_one_update(2, 96);
  // 3 micro-batches of 32, and uneven ones (40, 40, 16) on two devices, and on one device.
  expect_close(scratch_after_one_update(2, 32), big, 2e-6f);
  expect_close(scratch_after_one_update(2, 40), big, 2e-6f);
  expect_close(scratch_after_one_update(1, 32), big, 2e-6f);
  EXPECT_TRUE(differ(scratch_after_one_update(2, 32), nn::lenet_params(3, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses))) << "the update moved the parameters";
}

TEST(Accumulate, DeterministicModeGivesTheSameBitsOnOneAndTwoDevices) {
  const std::vector<Tensor> one = scratch_after_one_update(1, 32, 16);
  expect_bitwise_equal(scratch_after_one_update(2, 32, 16), one);
  expect_close(one, scratch_after_one_update(1, 96, 16), 2e-6f);
}

namespace {
std::unique_ptr<parallel::DataParallel> concise_lenet(int devices, int64_t chunk = 0) {
  std::unique_ptr<nn::Module> module = nn::lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  nn::init_weights(*module, nn::Init::kaiming, 9);
  parallel::DataParallelOptions options;
  options.deterministic_chunk = chunk;
  return std::make_unique<parallel::DataParallel>(std::move(module), parallel::cpu_devices(devices), options);
}

std::vector<Tensor> concise_after_two_updates(int devices, int64_t micro, int64_t chunk = 0) {
  auto net = concise_lenet(devices, chunk);
  optim::SGD sgd(net->replica_parameters(), {0.1f, 0.9f, 1e-4f});
  for (uint64_t update = 0; update < 2; ++update) {
    const auto [X, y] = random_images(96, 10 + update);
    for (int64_t at = 0; at < 96; at += micro) {
      const GradientSync sync = at + micro >= 96 ? GradientSync::now : GradientSync::later;
      net->forward_backward(rows_of(X, y, at, std::min<int64_t>(micro, 96 - at)), sync);
    }
    sgd.step();
  }
  return net->replica(devices - 1).parameters();
}
}  // namespace

TEST(Accumulate, ConciseMicroBatchesMakeTheUpdateOfOneBigStep) {
  const std::vector<Tensor> big = concise_after_two_updates(2, 96);
  expect_close(concise_after_two_updates(2, 32), big, 2e-6f);
  expect_close(concise_after_two_updates(2, 40), big, 2e-6f);
  expect_close(concise_after_two_updates(1, 48), big, 2e-6f);
  expect_bitwise_equal(concise_after_two_updates(2, 32, 16), concise_after_two_updates(1, 32, 16));
}

TEST(Accumulate, TheLoopGroupsMicroBatchesIntoUpdates) {
  // 512 images: batches of 128 (4 steps per epoch) against micro-batches of 32 with
  // --accumulate 4 (the same 4 updates, on the same shuffled examples).
  train::ScratchConfig big = scratch_config(2);
  big.training.epochs = 2;
  big.training.batch_size = 128;
  train::ScratchConfig micro = big;
  micro.training.batch_size = 32;
  micro.training.accumulate = 4;
  const train::TrainSummary a = train::train_lenet_from_scratch(train_subset(), test_subset(), big);
  const train::TrainSummary b = train::train_lenet_from_scratch(train_subset(), test_subset(), micro);
  expect_close(b.params, a.params, 2e-5f);
  ASSERT_EQ(b.history.size(), 2u);
  EXPECT_NEAR(b.history[1].train_loss, a.history[1].train_loss, 1e-4);
  EXPECT_EQ(b.history[1].test_acc, a.history[1].test_acc);
}

namespace {
train::ScratchConfig scheduled(const std::filesystem::path& dir) {
  train::ScratchConfig config;
  config.training.epochs = 3;
  config.training.batch_size = 32;
  config.training.accumulate = 2;  // 8 updates per epoch
  config.lr = 0.5f;
  config.training.seed = 5;
  config.devices = parallel::cpu_devices(2);
  config.training.schedule = {optim::ScheduleKind::cosine, 1};
  config.training.lr_scaling = optim::LrScaling::linear;
  config.training.run.checkpoint_dir = dir.string();
  config.training.run.checkpoint_every = dir.empty() ? 0 : 3;
  return config;
}
}  // namespace

TEST(ScheduleResume, AResumedRunTakesTheUninterruptedRunsLearningRates) {
  const train::TrainSummary whole = train::train_lenet_from_scratch(train_subset(), test_subset(), scheduled(""));
  train::ScratchConfig constant = scheduled("");
  constant.training.schedule = {};
  EXPECT_TRUE(differ(train::train_lenet_from_scratch(train_subset(), test_subset(), constant).params, whole.params))
      << "the schedule changes the run";

  // Stopped in the warmup epoch, then again in the cosine's, resumed each time.
  const auto dir = fresh_dir("scratch");
  for (int64_t stop : {5, 9}) {
    train::ScratchConfig part = scheduled(dir);
    part.training.run.resume = stop != 5;
    part.training.run.stop_signal = stop_after(stop);
    EXPECT_THROW(train::train_lenet_from_scratch(train_subset(), test_subset(), part), train::TrainingInterrupted);
  }
  train::ScratchConfig rest = scheduled(dir);
  rest.training.run.resume = true;
  train::ResumeInfo info;
  rest.training.run.on_resume = [&](const train::ResumeInfo& i) { info = i; };
  const train::TrainSummary resumed = train::train_lenet_from_scratch(train_subset(), test_subset(), rest);
  // The second stop: 8 more polls after step 5, one of them at the end of epoch 1.
  EXPECT_EQ(info.position.global_step, 13);
  EXPECT_EQ(info.position.batch_offset, 10) << "micro-batches into epoch 2 (5 updates of 2)";
  expect_bitwise_equal(resumed.params, whole.params);
  EXPECT_EQ(resumed.history.back().test_acc, whole.history.back().test_acc);
}

TEST(ScheduleResume, RefusesAnotherScheduleOrAccumulation) {
  const auto dir = fresh_dir("refuse");
  train::ScratchConfig first = scheduled(dir);
  first.training.epochs = 2;
  train::train_lenet_from_scratch(train_subset(), test_subset(), first);
  train::ScratchConfig other = scheduled(dir);
  other.training.run.resume = true;
  other.training.schedule = {optim::ScheduleKind::step, 1};
  EXPECT_THAT(error_of<checkpoint::CheckpointError>(
                  [&] { train::train_lenet_from_scratch(train_subset(), test_subset(), other); }),
              HasSubstr("it was written with `lr_schedule` cosine, this run has step"));
  other = scheduled(dir);
  other.training.run.resume = true;
  other.training.accumulate = 1;
  EXPECT_THAT(error_of<checkpoint::CheckpointError>(
                  [&] { train::train_lenet_from_scratch(train_subset(), test_subset(), other); }),
              HasSubstr("it was written with `accumulate` 2, this run has 1"));
}

TEST(ScheduleResume, ACheckpointWithoutAScheduleIsConstant) {
  // A file written before schedules and accumulation existed (the fuzzer's seed).
  const auto old_file = std::filesystem::path(__FILE__).parent_path().parent_path() / "fuzz/corpus/checkpoint/scratch.ckpt";
  const checkpoint::Checkpoint old = checkpoint::load(old_file);
  EXPECT_EQ(old.lr_schedule, "constant");
  EXPECT_EQ(old.warmup_epochs, 0);
  EXPECT_EQ(old.lr_scaling, "none");
  EXPECT_EQ(old.accumulate, 1);
  checkpoint::Checkpoint c = old;
  c.lr_schedule = "cosine";
  c.warmup_epochs = 2;
  c.lr_scaling = "linear";
  c.accumulate = 3;
  const checkpoint::Checkpoint back = checkpoint::decode(checkpoint::encode(c), "test");
  EXPECT_EQ(back.lr_schedule, "cosine");
  EXPECT_EQ(back.warmup_epochs, 2);
  EXPECT_EQ(back.lr_scaling, "linear");
  EXPECT_EQ(back.accumulate, 3);
}

TEST(ScheduleResume, ConciseCosineResumesBitForBit) {
  const auto config = [](const std::filesystem::path& dir) {
    train::TrainOptions c;
    c.epochs = 2;
    c.batch_size = 64;
    c.seed = 2;
    c.model = "lenet";
    c.schedule = {optim::ScheduleKind::cosine, 0};
    c.accumulate = 2;
    c.run.checkpoint_dir = dir.string();
    return c;
  };
  auto whole = concise_lenet(2);
  optim::SGD whole_sgd(whole->replica_parameters(), {0.1f, 0.9f, 0.0f});
  train::train(*whole, whole_sgd, train_subset(), test_subset(), config(""));
  EXPECT_LT(whole_sgd.lr(), 0.1f * 0.2f) << "the last step's lr is the cosine's";

  const auto dir = fresh_dir("concise");
  auto first = concise_lenet(2);
  optim::SGD first_sgd(first->replica_parameters(), {0.1f, 0.9f, 0.0f});
  train::TrainOptions part = config(dir);
  part.run.stop_signal = stop_after(3);
  EXPECT_THROW(train::train(*first, first_sgd, train_subset(), test_subset(), part), train::TrainingInterrupted);
  auto second = concise_lenet(2);
  optim::SGD second_sgd(second->replica_parameters(), {0.1f, 0.9f, 0.0f});
  part.run.stop_signal = {};
  part.run.resume = true;
  train::train(*second, second_sgd, train_subset(), test_subset(), part);
  expect_bitwise_equal(second->replica(1).parameters(), whole->replica(1).parameters());
}
