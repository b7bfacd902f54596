// The divergence guard: a step whose loss or gradient holds a NaN or an infinity would
// turn every parameter into garbage, so the training loop checks each update (on the
// devices: ops::record_non_finite into the step ledger, read as ledger_reads.h says), then
// stops with where it happened and what to try (on_nan stop, the default) or drops the
// update and goes on (on_nan skip, which reads every update's answer before applying it).
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dpt/core/tensor.h"
#include "dpt/parallel/step_ledger.h"

namespace dpt::train {

enum class OnNan { stop, skip };  // parse_on_nan (config.h) reads them by name

class DivergenceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What is wrong with a step, or nothing: "the loss is nan", or "the gradient of W2 holds
// 12 non-finite values (the first is inf)" naming the first such layer in model order.
// On the host, from the values themselves.
std::optional<std::string> find_non_finite(double loss_sum,
                                           const std::vector<std::pair<std::string, Tensor>>& gradients);

// The same words for an update the devices recorded; names[i]: the i-th gradient's parameter.
std::string describe_non_finite(const parallel::NonFiniteUpdate& update, const std::vector<std::string>& names);

// The message DivergenceError carries: the step, the cause and advice. `update_lr`: the
// learning rate of the update that diverged (after the schedule and lr_scaling); `lr`: the
// base rate the user set.
std::string divergence_message(const std::string& cause, int64_t epoch, int64_t step, float update_lr, float lr);

}  // namespace dpt::train
