// Module: a network layer or a whole network, holding named parameters (trained),
// buffers (state that is not trained, e.g. BatchNorm running statistics) and child
// modules, with a train/eval mode. clone() gives a deep copy with its own tensors: the
// replica a data-parallel device owns.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dpt/core/tensor.h"
#include "dpt/ops/ops.h"

namespace dpt::nn {

// Where a training forward sits in the run, for layers whose forward draws random numbers
// (Dropout): the replica engine sets it on each replica before each shard's forward, from
// the loader's batch, so that a draw depends on the example and not on the device that
// computes it.
struct StepContext {
  int64_t step = -1;      // the global batch's number in the run (data::Batch::number); -1: none set
  int64_t first_row = 0;  // the row of the input's first example in the global batch
};

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }

  // A deep copy: same structure, mode and values, separate storage.
  virtual std::unique_ptr<Module> clone() const = 0;

  // Every parameter / buffer of this module and its children, depth first in registration
  // order: the same order on every replica, which the allreduce and optimizer rely on.
  std::vector<Tensor> parameters() const;
  std::vector<Tensor> buffers() const;
  std::vector<std::pair<std::string, Tensor>> named_parameters(const std::string& prefix = "") const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(const std::string& prefix = "") const;
  // This module's direct children, in registration order, by name (for walking a network,
  // e.g. to export it).
  std::vector<std::pair<std::string, const Module*>> named_children() const;
  // This module's own parameters / buffers (not its children's), in registration order.
  const std::vector<std::pair<std::string, Tensor>>& own_parameters() const { return params_; }
  const std::vector<std::pair<std::string, Tensor>>& own_buffers() const { return buffers_; }

  // Moves every parameter and buffer, of this module and its children, to `device` in
  // place: the same tensors (and names) afterwards, their values now in that device's memory.
  void to(Device device);

  // Synchronized BatchNorm: every BatchNorm of this module and its children normalizes, in
  // training, with the statistics of the global batch, summed over the replicas by `sum`
  // (ops::sync_batch_norm2d); null: each with its own input's (the default). Every replica
  // must then run every forward and backward, as the sums are collectives.
  virtual void synchronize_batch_norm(std::shared_ptr<const ops::ReplicaSum> sum);

  // Sets the context of this module and its children (the replica engine does it).
  void set_step_context(const StepContext& context);
  const StepContext& step_context() const { return context_; }

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad() const;

  // Eval only (see nn/fold.h): folds every BatchNorm2d that directly follows a Conv2d into
  // that convolution's weights and bias, in place, and makes the BatchNorm the identity.
  // Here: recurses into the children; Sequential and Residual fold their own pairs.
  virtual void fold_batch_norms();

 protected:
  Module() = default;
  Module(const Module& other);  // deep copy, for clone()
  Module& operator=(const Module&) = delete;

  // Registers and returns the parameter's index for param(i); `t` is made to require grad.
  // Each throws std::invalid_argument for a name this module has given already (to a
  // parameter, buffer or child) or a tensor it holds already.
  size_t register_parameter(std::string name, Tensor t);
  size_t register_buffer(std::string name, Tensor t);
  void register_module(std::string name, std::unique_ptr<Module> child);

  const Tensor& param(size_t i) const { return params_[i].second; }
  Tensor& buffer(size_t i) { return buffers_[i].second; }
  Module& child(size_t i) const { return *children_[i].second; }
  size_t num_children() const { return children_.size(); }

 private:
  void check_new_name(const std::string& name, const Tensor* t) const;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::unique_ptr<Module>>> children_;
  bool training_ = true;
  StepContext context_;
};

// Implements clone() through Derived's copy constructor (which copies its configuration;
// Module's copy constructor deep-copies the tensors and children).
template <class Derived>
class Cloneable : public Module {
 public:
  std::unique_ptr<Module> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
};

}  // namespace dpt::nn
