// Learning-rate schedules: the learning rate of every update as a pure function of (global
// step, steps per epoch, epochs, base lr), so that a resumed run, knowing only its step,
// takes the same learning rates as an uninterrupted one.
//   constant  the base lr throughout (the lesson's)
//   step      the base lr, times 0.1 from half the epochs on and 0.01 from three quarters on
//             (the ResNet recipe's 30/60/90 milestones, scaled to the run's length)
//   cosine    base * (1 + cos(pi * t)) / 2, t running from 0 at the first step after the
//             warmup to 1 after the last step (Loshchilov and Hutter 2017, without restarts)
// Warmup (warmup_epochs W > 0): the first W * steps_per_epoch steps rise linearly, per step,
// to the base lr (step s: base * (s + 1) / warmup steps; Goyal et al. 2017), and the schedule
// proper runs over the steps after them.
// Scaling (`lr_scaling` linear): the base lr is lr * global batch / 256 (Goyal et al.'s
// linear scaling rule), the global batch being the examples of one update.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace dpt::optim {

enum class ScheduleKind { constant, step, cosine };
enum class LrScaling { none, linear };

inline constexpr std::array<std::string_view, 3> kLrSchedules{"constant", "step", "cosine"};
inline constexpr std::array<std::string_view, 2> kLrScalings{"none", "linear"};

// Throw ConfigError (`lr_schedule`, `lr_scaling`) for a name not listed above.
ScheduleKind parse_schedule(std::string_view text);
LrScaling parse_lr_scaling(std::string_view text);
std::string_view schedule_name(ScheduleKind kind);
std::string_view lr_scaling_name(LrScaling scaling);

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::constant;
  int warmup_epochs = 0;
};

// Throws ConfigError (`warmup_epochs`) for a negative warmup or one not shorter than `epochs`.
void check_schedule(const LrSchedule& schedule, int epochs);

// The base lr after scaling: lr, or lr * global_batch / 256.
float scaled_lr(float lr, LrScaling scaling, int64_t global_batch);

// The learning rate of update `step` (0-based, counted from the start of the run) of a run
// of `epochs` epochs of `steps_per_epoch` updates each. Steps past the end keep the last
// step's value.
float learning_rate(const LrSchedule& schedule, int64_t step, int64_t steps_per_epoch, int epochs, float base_lr);

}  // namespace dpt::optim
