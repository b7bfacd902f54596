// Test-only: a Communicator whose float allreduce (the gradients) does nothing, what a
// broken gradient allreduce does. Every other call (the integer allreduces that carry the
// step's figures, the evaluation counts and the stop vote, and the start-up broadcast)
// reaches the communicator it wraps, so the run goes on and reports its accuracy. Used by
// the unit tests' bars (tests/train_test.cc) and by dptrain_with_faults
// (DPT_TEST_GRADIENT_ALLREDUCE=noop) for the CLI's.
#pragma once

#include <string>

#include "forwarding_communicator.h"

namespace dpt::testing_support {

class NoOpGradientAllreduce final : public ForwardingCommunicator {
 public:
  using Communicator::allreduce;
  using ForwardingCommunicator::ForwardingCommunicator;
  std::string name() const override { return "no-op " + inner()->name(); }
  void allreduce(int rank, void* data, size_t count, DType type, parallel::ReduceOp op) override {
    if (type != DType::f32) inner()->allreduce(rank, data, count, type, op);
  }
};

}  // namespace dpt::testing_support
