// The step ledger (ops/ledger.h) on the CPU backend: the figures a step adds, the first
// non-finite update it records, and how records of several devices combine
// (parallel/step_ledger.h) into the divergence guard's words. tests/cuda_ops_test.cc
// compares the CUDA kernels with these.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "dpt/ops/ledger.h"
#include "dpt/ops/ops.h"
#include "dpt/parallel/step_ledger.h"
#include "dpt/train/divergence_guard.h"

using namespace dpt;

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor one(float v) { return Tensor::from_vector({v}, {1}); }
}  // namespace

TEST(StepLedger, AddsLossSumsInDoubleAndCountsCorrectRows) {
  const Tensor ledger = ops::new_ledger(Device::cpu());
  const Tensor logits = Tensor::from_vector({1, 5, 5, 0, /**/ 2, 2, 1, 0, /**/ -1, -2, -3, 4}, {3, 4});
  const Tensor labels = Tensor::from_labels({1, 1, 3});  // the first maximum wins: rows 0 and 2 right
  ops::add_step_figures(ledger, one(0.1f), logits, labels);
  ops::add_step_figures(ledger, one(0.2f), logits, labels);
  const ops::LedgerValues v = ops::take_ledger(ledger);
  EXPECT_EQ(v.loss_sum, 0.0 + static_cast<double>(0.1f) + static_cast<double>(0.2f));
  EXPECT_EQ(v.correct, 4);
  EXPECT_EQ(v.bad_tag, 0);
  const ops::LedgerValues after = ops::take_ledger(ledger);
  EXPECT_EQ(after.loss_sum, 0.0);
  EXPECT_EQ(after.correct, 0);
}

TEST(StepLedger, RefusesWhatIsNotALedger) {
  const Tensor logits = Tensor::zeros({2, 3});
  const Tensor labels = Tensor::from_labels({0, 1});
  EXPECT_THROW(ops::add_step_figures(Tensor::zeros({7}), one(1), logits, labels), std::invalid_argument);
  EXPECT_THROW(ops::record_non_finite(ops::new_ledger(Device::cpu()), 0, {}), std::invalid_argument);
}

TEST(StepLedger, RecordsTheFirstNonFiniteUpdateAndKeepsIt) {
  const Tensor ledger = ops::new_ledger(Device::cpu());
  const Tensor fine = Tensor::from_vector({1, 2}, {2});
  const Tensor bad = Tensor::from_vector({1, -kInf, NAN, 3}, {4});
  ops::record_non_finite(ledger, 1, {fine, fine});
  ops::record_non_finite(ledger, 2, {fine, Tensor(), bad, bad});
  ops::record_non_finite(ledger, 3, {bad});  // later: the first stays
  const ops::LedgerValues v = ops::take_ledger(ledger);
  EXPECT_EQ(v.bad_tag, 2);
  EXPECT_EQ(v.bad_cause, 2) << "the undefined gradient keeps its index";
  EXPECT_EQ(v.bad_count, 2);
  EXPECT_EQ(v.bad_first, ops::kNegInfBit);
  EXPECT_EQ(ops::take_ledger(ledger).bad_tag, 0) << "a read clears the record";
}

TEST(StepLedger, ANonFiniteLossOfAnyMicroBatchCountsBeforeTheGradients) {
  const Tensor ledger = ops::new_ledger(Device::cpu());
  const Tensor logits = Tensor::zeros({1, 2});
  const Tensor labels = Tensor::from_labels({0});
  ops::add_step_figures(ledger, one(kInf), logits, labels);
  // A read between the micro-batches of one update keeps the update's loss bits.
  ops::take_ledger(ledger);
  ops::add_step_figures(ledger, one(1), logits, labels);
  ops::record_non_finite(ledger, 4, {Tensor::from_vector({NAN}, {1})});
  const ops::LedgerValues v = ops::take_ledger(ledger);
  EXPECT_EQ(v.bad_tag, 4);
  EXPECT_EQ(v.bad_cause, -1);
  EXPECT_EQ(v.bad_first, ops::kPosInfBit);
  // The next update starts with clean loss bits.
  ops::record_non_finite(ledger, 5, {});
  EXPECT_EQ(ops::take_ledger(ledger).bad_tag, 0);
}

TEST(StepLedger, DevicesCombineToTheEarliestUpdateWithTheLossFirst) {
  using parallel::NonFiniteUpdate;
  EXPECT_FALSE(parallel::first_non_finite({{}, {}}).has_value());
  const NonFiniteUpdate grad_at_5{5, 2, 7, ops::kNanBit}, loss_at_5{5, -1, 0, ops::kPosInfBit},
      loss_at_5_neg{5, -1, 0, ops::kNegInfBit}, grad_at_3{3, 0, 1, ops::kPosInfBit};
  EXPECT_EQ(parallel::first_non_finite({grad_at_5, grad_at_3})->tag, 3);
  const auto loss = parallel::first_non_finite({grad_at_5, loss_at_5, loss_at_5_neg});
  ASSERT_TRUE(loss.has_value());
  EXPECT_EQ(loss->cause, -1);
  // +inf on one device and -inf on another: their sum, the old guard's loss, is nan.
  EXPECT_EQ(train::describe_non_finite(*loss, {}), "the loss is nan");
  EXPECT_EQ(train::describe_non_finite(grad_at_5, {"W1", "b1", "W2"}),
            "the gradient of W2 holds 7 non-finite values (the first is nan)");
  EXPECT_EQ(train::describe_non_finite(grad_at_3, {"W1"}),
            "the gradient of W1 holds 1 non-finite value (the first is inf)");
}

TEST(StepLedger, DescribesAsTheHostGuardDoes) {
  // One wording: the host's find_non_finite and the devices' record agree.
  const Tensor fine = Tensor::from_vector({1, 2}, {2});
  const Tensor bad = Tensor::from_vector({1, kInf, NAN}, {3});
  const Tensor ledger = ops::new_ledger(Device::cpu());
  ops::record_non_finite(ledger, 1, {fine, bad, bad});
  const ops::LedgerValues v = ops::take_ledger(ledger);
  EXPECT_EQ(train::describe_non_finite({v.bad_tag, v.bad_cause, v.bad_count, v.bad_first}, {"W1", "W2", "b2"}),
            *train::find_non_finite(3.0, {{"W1", fine}, {"W2", bad}, {"b2", bad}}));
}
