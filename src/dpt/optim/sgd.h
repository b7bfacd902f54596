// The lesson's minibatch SGD: the loss is summed over the batch, so the step divides by
// the batch size. With data parallelism the batch is the global one, and the gradients
// must already be summed over all devices.
#pragma once

#include <cstdint>
#include <vector>

#include "dpt/core/tensor.h"

namespace dpt::optim {

// param -= lr * param.grad / batch_size, then the gradient is zeroed. Throws
// std::invalid_argument for a negative or non-finite lr or a batch_size < 1.
void sgd(const std::vector<Tensor>& params, float lr, int64_t batch_size);

// Checks shared with the CLI, so both report the same message.
void check_learning_rate(double lr);

}  // namespace dpt::optim
