#include "dpt/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "dpt/core/config_error.h"

namespace dpt::optim {

ScheduleKind parse_schedule(std::string_view text) {
  if (text == "constant") return ScheduleKind::constant;
  if (text == "step") return ScheduleKind::step;
  if (text == "cosine") return ScheduleKind::cosine;
  throw bad_choice("lr_schedule", text, kLrSchedules);
}

LrScaling parse_lr_scaling(std::string_view text) {
  if (text == "none") return LrScaling::none;
  if (text == "linear") return LrScaling::linear;
  throw bad_choice("lr_scaling", text, kLrScalings);
}

std::string_view schedule_name(ScheduleKind kind) { return kLrSchedules[static_cast<size_t>(kind)]; }
std::string_view lr_scaling_name(LrScaling scaling) { return kLrScalings[static_cast<size_t>(scaling)]; }

void check_schedule(const LrSchedule& schedule, int epochs) {
  if (schedule.warmup_epochs < 0) {
    throw ConfigError("warmup_epochs",
                      "`warmup_epochs` must be >= 0, got " + std::to_string(schedule.warmup_epochs));
  }
  if (schedule.warmup_epochs > 0 && schedule.warmup_epochs >= epochs) {
    throw ConfigError("warmup_epochs", "`warmup_epochs` " + std::to_string(schedule.warmup_epochs) +
                                           " must be fewer than the " + std::to_string(epochs) +
                                           " `epochs`, leaving epochs for the schedule after it");
  }
}

float scaled_lr(float lr, LrScaling scaling, int64_t global_batch) {
  if (scaling == LrScaling::none) return lr;
  return static_cast<float>(static_cast<double>(lr) * static_cast<double>(global_batch) / 256.0);
}

float learning_rate(const LrSchedule& schedule, int64_t step, int64_t steps_per_epoch, int epochs, float base_lr) {
  const int64_t total = std::max<int64_t>(1, steps_per_epoch * epochs);
  step = std::clamp<int64_t>(step, 0, total - 1);
  const int64_t warmup = std::min<int64_t>(total - 1, steps_per_epoch * schedule.warmup_epochs);
  if (step < warmup) {
    return static_cast<float>(static_cast<double>(base_lr) * static_cast<double>(step + 1) /
                              static_cast<double>(warmup));
  }
  const double after = static_cast<double>(step - warmup);  // steps after the warmup
  const double span = static_cast<double>(total - warmup);  // steps of the schedule proper
  switch (schedule.kind) {
    case ScheduleKind::constant:
      return base_lr;
    case ScheduleKind::step: {
      // Milestones at half and three quarters of the whole run, in steps.
      const double at = static_cast<double>(step);
      const double factor = at >= 0.75 * static_cast<double>(total) ? 0.01 : at >= 0.5 * static_cast<double>(total) ? 0.1 : 1.0;
      return static_cast<float>(static_cast<double>(base_lr) * factor);
    }
    case ScheduleKind::cosine:
      return static_cast<float>(static_cast<double>(base_lr) * 0.5 *
                                (1.0 + std::cos(std::numbers::pi * after / span)));
  }
  return base_lr;
}

}  // namespace dpt::optim
