// ZeRO stage 1 (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
// Parameter Models", 2020; DeepSpeed, PyTorch's ZeroRedundancyOptimizer): the optimizer
// state sharded over the job's replicas. Replica g of N keeps the state of one slice of
// the flattened parameters only (sharded_collectives.h's slice g, a 1/N share), so each
// replica holds 1/N of SGD's momentum or Adam's moments. A step:
//   1. the group reduce-scatters the gradients (ReplicaGroupOptions::zero = 1): each
//      replica gets the job's sum for its slice;
//   2. each replica steps its slice with an optimizer of its own over that slice (the same
//      update rules: they are elementwise);
//   3. the updated slices are all-gathered, so every replica holds every parameter again.
// The wire volume is one allreduce's. Checkpoints hold the whole state (gather_state), the
// same file an unsharded run writes, so a run resumes on any number of replicas.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dpt/core/tensor.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/replica_group.h"
#include "dpt/parallel/ring_schedule.h"

namespace dpt::parallel {

class ZeroOptimizer final : public optim::Optimizer {
 public:
  // Steps `group`'s replicas (built with zero = 1), each slice with optimizer `name` and
  // `settings` (optim::make_optimizer's).
  ZeroOptimizer(ReplicaGroup& group, std::string_view name, const optim::OptimizerSettings& settings);

  std::string name() const override { return name_; }
  // Every local replica's slice stepped, then the slices all-gathered (a collective).
  void step() override;
  // After gather_state(): the whole state, as an unsharded optimizer holds it.
  const Tensor& state(size_t slot, size_t replica, size_t param) const override;
  void gather_state() override;
  // Each replica keeps its slice of `values` (the whole state, as checkpoints hold it).
  void load_state(const std::vector<std::vector<Tensor>>& values, int64_t steps) override;
  size_t state_bytes() const override;
  // What an unsharded optimizer would hold in this process: every slot the shards keep,
  // for every parameter, per local replica.
  size_t unsharded_state_bytes() const;

 private:
  void update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& state) override;
  // Local replica `device`'s slice of the flattened parameters.
  ring::Range slice_of(int device) const;

  ReplicaGroup& group_;
  std::string name_;
  size_t total_ = 0;                                      // elements of all parameters
  std::vector<Tensor> slices_;                            // per local replica: its slice, 1-D, with a gradient
  std::vector<std::unique_ptr<optim::Optimizer>> shards_;  // per local replica: steps its slice
  std::vector<std::vector<float>> flat_;                  // per local replica: host buffer of `total_`
  std::vector<std::vector<Tensor>> gathered_;             // [slot][param], gather_state's
};

// The optimizer for `group`'s replicas: a ZeroOptimizer when the group shards the state
// (`zero` 1), else optim::make_optimizer over every replica's parameters.
std::unique_ptr<optim::Optimizer> make_replica_optimizer(ReplicaGroup& group, std::string_view name,
                                                         const optim::OptimizerSettings& settings);

}  // namespace dpt::parallel
