// The learning-rate schedules (optim/lr_schedule.h): their values at known steps, the
// warmup, the linear scaling rule and the checks of their settings.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "dpt/core/config_error.h"
#include "dpt/optim/lr_schedule.h"
#include "dpt/optim/optimizer.h"
#include "test_support.h"

using namespace dpt;
using dpt::testing_support::error_of;
using optim::LrSchedule;
using optim::ScheduleKind;

TEST(LrSchedule, ConstantIsTheBaseLrAtEveryStep) {
  for (int64_t step : {0, 1, 234, 2349, 99999}) {
    EXPECT_EQ(optim::learning_rate({ScheduleKind::constant, 0}, step, 235, 10, 0.2f), 0.2f) << step;
  }
}

TEST(LrSchedule, StepDropsTenfoldAtHalfAndThreeQuarters) {
  const LrSchedule s{ScheduleKind::step, 0};
  // 10 epochs of 10 steps: 100 steps, milestones at steps 50 and 75.
  EXPECT_FLOAT_EQ(optim::learning_rate(s, 0, 10, 10, 0.5f), 0.5f);
  EXPECT_FLOAT_EQ(optim::learning_rate(s, 49, 10, 10, 0.5f), 0.5f);
  EXPECT_FLOAT_EQ(optim::learning_rate(s, 50, 10, 10, 0.5f), 0.05f);
  EXPECT_FLOAT_EQ(optim::learning_rate(s, 74, 10, 10, 0.5f), 0.05f);
  EXPECT_FLOAT_EQ(optim::learning_rate(s, 75, 10, 10, 0.5f), 0.005f);
  EXPECT_FLOAT_EQ(optim::learning_rate(s, 99, 10, 10, 0.5f), 0.005f);
}

TEST(LrSchedule, CosineRunsFromTheBaseLrTowardsZero) {
  const LrSchedule s{ScheduleKind::cosine, 0};
  const int64_t total = 100;  // 10 epochs of 10 steps
  EXPECT_FLOAT_EQ(optim::learning_rate(s, 0, 10, 10, 0.4f), 0.4f);
  EXPECT_FLOAT_EQ(optim::learning_rate(s, 50, 10, 10, 0.4f), 0.2f);  // half way: half the lr
  EXPECT_FLOAT_EQ(optim::learning_rate(s, 25, 10, 10, 0.4f),
                  static_cast<float>(0.4 * 0.5 * (1 + std::cos(std::numbers::pi * 0.25))));
  const float last = optim::learning_rate(s, total - 1, 10, 10, 0.4f);
  EXPECT_GT(last, 0.0f);
  EXPECT_LT(last, 0.4f * 0.001f);
  // Steps past the end keep the last value; every step is no larger than the one before.
  EXPECT_EQ(optim::learning_rate(s, total + 7, 10, 10, 0.4f), last);
  for (int64_t step = 1; step < total; ++step) {
    EXPECT_LE(optim::learning_rate(s, step, 10, 10, 0.4f), optim::learning_rate(s, step - 1, 10, 10, 0.4f));
  }
}

TEST(LrSchedule, WarmupRisesLinearlyPerStepThenTheScheduleRunsOverTheRest) {
  const LrSchedule s{ScheduleKind::cosine, 2};  // 2 epochs of 10 steps: 20 warmup steps
  EXPECT_FLOAT_EQ(optim::learning_rate(s, 0, 10, 10, 0.4f), 0.4f / 20);
  EXPECT_FLOAT_EQ(optim::learning_rate(s, 9, 10, 10, 0.4f), 0.4f * 10 / 20);
  EXPECT_FLOAT_EQ(optim::learning_rate(s, 19, 10, 10, 0.4f), 0.4f);
  // The cosine then spans steps 20..99: its start is the base lr, its middle (step 60) half.
  EXPECT_FLOAT_EQ(optim::learning_rate(s, 20, 10, 10, 0.4f), 0.4f);
  EXPECT_FLOAT_EQ(optim::learning_rate(s, 60, 10, 10, 0.4f), 0.2f);
  // A constant schedule with warmup: the warmup, then the base lr.
  EXPECT_FLOAT_EQ(optim::learning_rate({ScheduleKind::constant, 1}, 4, 10, 10, 0.4f), 0.4f * 5 / 10);
  EXPECT_EQ(optim::learning_rate({ScheduleKind::constant, 1}, 10, 10, 10, 0.4f), 0.4f);
}

TEST(LrSchedule, LinearScalingIsTheBatchOver256) {
  EXPECT_EQ(optim::scaled_lr(0.1f, optim::LrScaling::none, 1024), 0.1f);
  EXPECT_FLOAT_EQ(optim::scaled_lr(0.1f, optim::LrScaling::linear, 1024), 0.4f);
  EXPECT_FLOAT_EQ(optim::scaled_lr(0.2f, optim::LrScaling::linear, 256), 0.2f);
  EXPECT_FLOAT_EQ(optim::scaled_lr(0.2f, optim::LrScaling::linear, 64), 0.05f);
}

TEST(LrSchedule, NamesAndChecksTheirSettings) {
  EXPECT_EQ(optim::parse_schedule("cosine"), ScheduleKind::cosine);
  EXPECT_EQ(optim::schedule_name(ScheduleKind::step), "step");
  EXPECT_EQ(optim::lr_scaling_name(optim::parse_lr_scaling("linear")), "linear");
  EXPECT_EQ(error_of<ConfigError>([] { optim::parse_schedule("linear"); }),
            "`lr_schedule` must be constant, step or cosine, got 'linear'");
  EXPECT_EQ(error_of<ConfigError>([] { optim::parse_lr_scaling("sqrt"); }),
            "`lr_scaling` must be none or linear, got 'sqrt'");
  EXPECT_EQ(error_of<ConfigError>([] { optim::check_schedule({ScheduleKind::cosine, -1}, 10); }),
            "`warmup_epochs` must be >= 0, got -1");
  EXPECT_EQ(error_of<ConfigError>([] { optim::check_schedule({ScheduleKind::cosine, 10}, 10); }),
            "`warmup_epochs` 10 must be fewer than the 10 `epochs`, leaving epochs for the schedule after it");
  EXPECT_NO_THROW(optim::check_schedule({ScheduleKind::cosine, 9}, 10));
}

TEST(Sgd, SetLrChangesTheNextStep) {
  Tensor p = Tensor::from_vector({1.0f}, {1});
  p.set_requires_grad(true);
  optim::SGD sgd({p}, {0.1f, 0.0f, 0.0f});
  sgd.set_lr(0.5f);
  EXPECT_EQ(sgd.options().lr, 0.5f);
  p.set_grad(Tensor::from_vector({2.0f}, {1}));
  sgd.step();
  EXPECT_FLOAT_EQ(p.to_vector()[0], 0.0f);
  EXPECT_EQ(error_of<ConfigError>([&] { sgd.set_lr(-1.0f); }),
            "learning rate must be a finite number >= 0, got -1.000000");
}
