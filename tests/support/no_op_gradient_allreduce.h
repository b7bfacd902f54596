// Test-only: a Communicator whose float allreduce (the gradients) does nothing, what a
// broken gradient allreduce does. Every other call (the integer allreduces that carry the
// step's figures, the evaluation counts and the stop vote, and the start-up broadcast)
// reaches the communicator it wraps, so the run goes on and reports its accuracy. Used by
// the unit tests' bars (tests/train_test.cc) and by dptrain_with_faults
// (DPT_TEST_GRADIENT_ALLREDUCE=noop) for the CLI's.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dpt/parallel/communicator.h"

namespace dpt::testing_support {

class NoOpGradientAllreduce final : public parallel::Communicator {
 public:
  using Communicator::allreduce;
  using Communicator::broadcast;
  explicit NoOpGradientAllreduce(std::shared_ptr<parallel::Communicator> inner) : inner_(std::move(inner)) {}
  int size() const override { return inner_->size(); }
  std::string name() const override { return "no-op " + inner_->name(); }
  void allreduce(int rank, void* data, size_t count, DType type, parallel::ReduceOp op) override {
    if (type != DType::f32) inner_->allreduce(rank, data, count, type, op);
  }
  void broadcast(int rank, void* data, size_t count, DType type, int root) override {
    inner_->broadcast(rank, data, count, type, root);
  }
  void alltoall(int rank, const std::vector<Block>& send, const std::vector<Block>& receive, DType type) override {
    inner_->alltoall(rank, send, receive, type);
  }
  void barrier(int rank) override { inner_->barrier(rank); }
  void abort(const std::string& reason) override { inner_->abort(reason); }
  size_t bytes_received(int rank) const override { return inner_->bytes_received(rank); }

 private:
  std::shared_ptr<parallel::Communicator> inner_;
};

}  // namespace dpt::testing_support
