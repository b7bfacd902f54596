// Test-only: a Communicator that forwards every call to the one it wraps, for test
// communicators that change one call (fault injection, a no-op gradient allreduce) and
// override just that one.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dpt/parallel/communicator.h"

namespace dpt::testing_support {

class ForwardingCommunicator : public parallel::Communicator {
 public:
  using Communicator::allreduce;
  using Communicator::broadcast;
  explicit ForwardingCommunicator(std::shared_ptr<parallel::Communicator> inner) : inner_(std::move(inner)) {}

  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }
  bool reduces_device_memory() const override { return inner_->reduces_device_memory(); }
  void allreduce(int rank, void* data, size_t count, DType type, parallel::ReduceOp op) override {
    inner_->allreduce(rank, data, count, type, op);
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

 protected:
  const std::shared_ptr<parallel::Communicator>& inner() const { return inner_; }

 private:
  std::shared_ptr<parallel::Communicator> inner_;
};

}  // namespace dpt::testing_support
