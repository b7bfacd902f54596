// The training loop's lazy reads of the step ledgers (train/ledger_reads.h), on CPU
// devices: a ScratchTrainer that says its reads are costly is read as a GPU run is (every
// kLedgerReadEvery updates, before checkpoints and at an epoch's end), and a gradient made
// non-finite at a chosen update must stop the run within that interval, the message
// naming that update, with the figures of a run read at every step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "dpt/data/idx_dataset.h"
#include "dpt/core/random.h"
#include "dpt/nn/lenet.h"
#include "dpt/parallel/device_list.h"
#include "dpt/train/ledger_reads.h"
#include "dpt/train/train_from_scratch.h"
#include "dpt/checkpoint/run_folder.h"
#include "test_support.h"

using namespace dpt;
using testing::HasSubstr;

namespace {

// 512 images of noise in 10 classes: 32 updates of 16 per epoch.
data::InMemoryDataset noise(int64_t n, uint64_t seed) {
  data::InMemoryDataset d;
  Rng rng(seed);
  d.pixels.resize(static_cast<size_t>(n * 28 * 28));
  for (uint8_t& p : d.pixels) p = static_cast<uint8_t>(rng() % 256);
  for (int64_t i = 0; i < n; ++i) d.labels.push_back(static_cast<int64_t>(rng() % 10));
  return d;
}

train::ScratchConfig config(int devices) {
  train::ScratchConfig c;
  c.training.epochs = 1;
  c.training.batch_size = 16;
  c.lr = 0.1f;
  c.training.seed = 2;
  c.devices = parallel::cpu_devices(devices);
  return c;
}

// The from-scratch trainer, read lazily unless `eager`; the gradient of W2 gets an inf at
// the update tagged `poison` (0: never), as an overflow would leave it.
class CountingTrainer : public train::ScratchTrainer {
 public:
  CountingTrainer(const train::ScratchConfig& c, bool eager, int64_t poison)
      : ScratchTrainer(c, nn::lenet_params(c.training.seed, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses)), eager_(eager), poison_(poison) {}
  bool ledger_reads_are_free() const override { return eager_; }
  void check_finite(int64_t tag) override {
    if (tag == poison_) {
      for (const Tensor& p : device_params()[0]) {
        if (p.name() == "W2") p.grad().data<float>()[3] = std::numeric_limits<float>::infinity();
      }
    }
    ScratchTrainer::check_finite(tag);
  }
  parallel::StepLedger read_ledger() override {
    ++reads;
    return ScratchTrainer::read_ledger();
  }
  void apply_update() override {
    ++updates;
    ScratchTrainer::apply_update();
  }
  int64_t reads = 0;
  int64_t updates = 0;

 private:
  bool eager_;
  int64_t poison_;
};

// What train_lenet_from_scratch gives the loop.
train::TrainOptions options_of(const train::ScratchConfig& c) {
  train::TrainOptions options = c.training;
  options.model = train::kScratchModelName;
  return options;
}

std::string divergence_of(CountingTrainer& trainer, const train::ScratchConfig& c, const data::InMemoryDataset& data) {
  return dpt::testing_support::error_of<train::DivergenceError>(
      [&] { train::run_training(trainer, data, data, options_of(c), c.lr); });
}

std::string message_for(int64_t step) {
  return "training diverged in epoch 1, step " + std::to_string(step) +
         ": the gradient of W2 holds 1 non-finite value (the first is inf). Lower `lr` (now 0.1), check the "
         "input data, or pass `on_nan` skip to drop such steps and go on";
}

}  // namespace

TEST(LazyLedgerReads, StopWithinTheReadIntervalNamingTheDivergedUpdate) {
  const data::InMemoryDataset data = noise(512, 1);
  for (const int64_t poison : {3, 20}) {
    const train::ScratchConfig c = config(2);
    CountingTrainer trainer(c, /*eager=*/false, poison);
    EXPECT_EQ(divergence_of(trainer, c, data), message_for(poison));
    // Applied: every update before the bad one, it and at most kLedgerReadEvery - 1 after it
    // (the read that sees it comes before its own update is applied).
    EXPECT_GE(trainer.updates, poison - 1);
    EXPECT_LE(trainer.updates, poison - 1 + train::kLedgerReadEvery) << "poison at " << poison;
    // Lazy: the first update's read (figures for the progress line), then one read per interval.
    EXPECT_LE(trainer.reads, 1 + (poison + train::kLedgerReadEvery - 1) / train::kLedgerReadEvery + 1);
  }
}

TEST(LazyLedgerReads, EagerReadsStopAtTheDivergedUpdateItself) {
  const data::InMemoryDataset data = noise(512, 1);
  const train::ScratchConfig c = config(2);
  CountingTrainer trainer(c, /*eager=*/true, 5);
  EXPECT_EQ(divergence_of(trainer, c, data), message_for(5));
  EXPECT_EQ(trainer.updates, 4);
}

TEST(LazyLedgerReads, FiguresAndParametersEqualThoseOfReadsAtEveryStep) {
  const data::InMemoryDataset data = noise(512, 1);
  const train::ScratchConfig c = config(2);
  CountingTrainer lazy(c, false, 0), eager(c, true, 0);
  const train::LoopResult a = train::run_training(lazy, data, data, options_of(c), c.lr);
  const train::LoopResult b = train::run_training(eager, data, data, options_of(c), c.lr);
  ASSERT_EQ(a.history.size(), 1u);
  ASSERT_EQ(b.history.size(), 1u);
  // The same float losses, summed in double in another grouping: equal to rounding.
  EXPECT_NEAR(a.history[0].train_loss, b.history[0].train_loss, 1e-12);
  EXPECT_EQ(a.history[0].train_acc, b.history[0].train_acc);
  EXPECT_EQ(a.history[0].test_acc, b.history[0].test_acc);
  EXPECT_EQ(a.examples_trained, b.examples_trained);
  for (size_t i = 0; i < lazy.device_params()[0].size(); ++i) {
    EXPECT_EQ(lazy.device_params()[0][i].to_vector(), eager.device_params()[0][i].to_vector()) << i;
  }
  EXPECT_EQ(lazy.updates, 32);
  EXPECT_LE(lazy.reads, 1 + 32 / train::kLedgerReadEvery + 1);
  EXPECT_GE(eager.reads, 64) << "eager: after every micro-batch and every update";
}

TEST(LazyLedgerReads, SkipReadsEveryUpdateAndDropsOnlyTheDivergedOne) {
  const data::InMemoryDataset data = noise(512, 1);
  train::ScratchConfig c = config(1);
  c.training.run.on_nan = train::OnNan::skip;
  std::vector<std::string> warnings;
  c.training.run.warn = [&](const std::string& w) { warnings.push_back(w); };
  CountingTrainer trainer(c, /*eager=*/false, 6);
  const train::LoopResult result = train::run_training(trainer, data, data, options_of(c), c.lr);
  EXPECT_EQ(result.skipped_steps, 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], message_for(6) + " (`on_nan` skip: update dropped)");
  EXPECT_EQ(trainer.updates, 31);
  EXPECT_GE(trainer.reads, 32);
  EXPECT_EQ(result.examples_trained, 512 - 16);
}

TEST(LazyLedgerReads, ACheckpointWaitsForTheReadAndANonFiniteUpdateIsNeverSaved) {
  const data::InMemoryDataset data = noise(512, 1);
  const auto dir = dpt::testing_support::unique_temp_dir("dpt_lazy_reads_checkpoint");
  train::ScratchConfig c = config(1);
  c.training.run.checkpoint_dir = dir.string();
  c.training.run.checkpoint_every = 4;
  CountingTrainer trainer(c, /*eager=*/false, 6);
  EXPECT_EQ(divergence_of(trainer, c, data), message_for(6));
  // The checkpoint after update 8 read the ledgers first and stopped there.
  EXPECT_LE(trainer.updates, 8);
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name != checkpoint::kLockFileName) files.push_back(name);  // the run's lock stays, as designed
  }
  EXPECT_THAT(files, testing::ElementsAre("step-000000004.ckpt"));
  std::filesystem::remove_all(dir);
}

TEST(LedgerReads, ReadsAsPromised) {
  train::LedgerReads lazy(false, train::OnNan::stop), skip(false, train::OnNan::skip), free(true, train::OnNan::stop);
  EXPECT_TRUE(lazy.due(false)) << "an epoch's first update";
  EXPECT_FALSE(lazy.after_each_micro_batch());
  EXPECT_TRUE(free.after_each_micro_batch());
  for (int64_t tag = 1; tag < train::kLedgerReadEvery; ++tag) {
    lazy.checked(tag, 1, tag);
    EXPECT_FALSE(lazy.due(true)) << tag;
  }
  lazy.checked(train::kLedgerReadEvery, 2, 1);
  EXPECT_TRUE(lazy.due(true));
  EXPECT_EQ(lazy.where(train::kLedgerReadEvery), std::make_pair(int64_t{2}, int64_t{1}));
  lazy.read_done();
  EXPECT_FALSE(lazy.any_unread());
  EXPECT_TRUE(skip.due(true));
  EXPECT_TRUE(free.due(true));
}
