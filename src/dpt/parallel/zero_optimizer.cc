#include "dpt/parallel/zero_optimizer.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "dpt/core/trace.h"
#include "dpt/parallel/allreduce.h"
#include "dpt/parallel/sharded_collectives.h"

namespace dpt::parallel {

namespace {
std::vector<std::vector<Tensor>> replica_params_of(const ReplicaGroup& group) {
  std::vector<std::vector<Tensor>> params;
  for (size_t d = 0; d < group.num_replicas(); ++d) params.push_back(group.replica(d).params);
  return params;
}


void copy_range(const float* from, size_t count, float* to) { std::copy(from, from + count, to); }
}  // namespace

ZeroOptimizer::ZeroOptimizer(ReplicaGroup& group, std::string_view name, const optim::OptimizerSettings& settings)
    : Optimizer(replica_params_of(group), settings.lr, optim::optimizer_slots(name)), group_(group), name_(name) {
  if (group.options().zero != 1) {
    throw std::invalid_argument("ZeroOptimizer: the ReplicaGroup must reduce-scatter the gradients (`zero` 1)");
  }
  total_ = total_values(group.replica(0).params);
  const size_t replicas = static_cast<size_t>(group.communicator().size());
  if (total_ < replicas) {
    throw std::invalid_argument("ZeroOptimizer: " + std::to_string(total_) + " parameter values cannot be shared out " +
                                "over " + std::to_string(replicas) + " replicas");
  }
  for (size_t d = 0; d < group.num_replicas(); ++d) {
    const Tensor slice = Tensor::zeros({static_cast<int64_t>(slice_of(static_cast<int>(d)).size())}, DType::f32,
                                       group.devices()[d]);
    slice.ensure_grad();
    slices_.push_back(slice);
    shards_.push_back(optim::make_optimizer(name, {{slice}}, settings));
    flat_.emplace_back(total_);
  }
}

ring::Range ZeroOptimizer::slice_of(int device) const {
  return my_slice(group_.communicator(), group_.global_rank(device), total_);
}

void ZeroOptimizer::step() {
  count_step();
  group_.update([&](int d) {
    const std::vector<Tensor>& params = group_.replica(d).params;
    std::vector<float>& flat = flat_[d];
    const ring::Range slice = slice_of(d);
    const Tensor& mine = slices_[d];
    // The slice's gradient (the job's sum, from the group's reduce-scatter) and values.
    pack_to_host(gradients_of(params), flat);
    copy_range(flat.data() + slice.begin, slice.size(), mine.grad().data<float>());
    pack_to_host(params, flat);
    copy_range(flat.data() + slice.begin, slice.size(), mine.data<float>());
    shards_[d]->set_lr(lr());
    shards_[d]->step();
    copy_range(mine.data<float>(), slice.size(), flat.data() + slice.begin);
    {
      const trace::Span span(trace::Phase::gather_parameters);
      all_gather(group_.communicator(), group_.global_rank(d), flat.data(), flat.size(), Compression::none);
    }
    unpack_from_host(flat, params, 1.0f);
  });
}

void ZeroOptimizer::gather_state() {
  const std::vector<Tensor>& params = group_.replica(0).params;
  gathered_.assign(slots().size(), std::vector<Tensor>(params.size()));
  for (size_t s = 0; s < slots().size(); ++s) {
    // Every replica steps alike, so a slot exists on all of them or on none.
    if (!shards_[0]->state(s, 0, 0).defined()) continue;
    std::vector<Tensor> whole;
    for (const Tensor& p : params) whole.push_back(Tensor::empty(p.shape(), DType::f32, Device::cpu()));
    group_.update([&](int d) {
      std::vector<float>& flat = flat_[d];
      const ring::Range slice = slice_of(d);
      copy_range(shards_[d]->state(s, 0, 0).data<float>(), slice.size(), flat.data() + slice.begin);
      all_gather(group_.communicator(), group_.global_rank(d), flat.data(), flat.size(), Compression::none);
      if (d == 0) unpack_from_host(flat, whole, 1.0f);
    });
    gathered_[s] = std::move(whole);
  }
}

const Tensor& ZeroOptimizer::state(size_t slot, size_t replica, size_t param) const {
  if (gathered_.empty()) throw std::logic_error("ZeroOptimizer: call gather_state() before state()");
  if (replica >= group_.num_replicas()) throw std::out_of_range("ZeroOptimizer: no replica " + std::to_string(replica));
  return gathered_.at(slot).at(param);
}

void ZeroOptimizer::load_state(const std::vector<std::vector<Tensor>>& values, int64_t steps) {
  const std::vector<Tensor>& params = group_.replica(0).params;
  if (values.size() != slots().size()) {
    throw std::invalid_argument(name_ + ": " + std::to_string(values.size()) + " state slots given, it keeps " +
                                std::to_string(slots().size()));
  }
  std::vector<std::vector<float>> whole(values.size());  // each slot flattened, or empty: none yet
  for (size_t s = 0; s < values.size(); ++s) {
    if (values[s].size() != params.size()) {
      throw std::invalid_argument(name_ + ": " + std::to_string(values[s].size()) + " " + slots()[s] +
                                  " tensors for " + std::to_string(params.size()) + " parameters");
    }
    const auto defined = std::count_if(values[s].begin(), values[s].end(), [](const Tensor& t) { return t.defined(); });
    if (defined == 0) continue;
    if (static_cast<size_t>(defined) != params.size()) {
      throw std::invalid_argument(name_ + " sharded (`zero` 1) needs " + slots()[s] +
                                  " for every parameter or for none");
    }
    for (size_t i = 0; i < params.size(); ++i) {
      if (values[s][i].shape() != params[i].shape()) {
        throw std::invalid_argument(name_ + ": " + slots()[s] + " of parameter " + std::to_string(i) + " is " +
                                    shape_str(values[s][i].shape()) + ", the parameter " + shape_str(params[i].shape()));
      }
    }
    pack_to_host(values[s], whole[s]);
  }
  for (size_t d = 0; d < group_.num_replicas(); ++d) {
    const ring::Range slice = slice_of(static_cast<int>(d));
    std::vector<std::vector<Tensor>> mine(values.size());
    for (size_t s = 0; s < values.size(); ++s) {
      if (whole[s].empty()) {
        mine[s] = {Tensor()};
        continue;
      }
      const std::vector<float> part(whole[s].begin() + static_cast<std::ptrdiff_t>(slice.begin),
                                    whole[s].begin() + static_cast<std::ptrdiff_t>(slice.end));
      mine[s] = {Tensor::from_vector(part, {static_cast<int64_t>(part.size())})};
    }
    shards_[d]->load_state(mine, steps);
  }
  set_steps(steps);
  gathered_.clear();
}

size_t ZeroOptimizer::state_bytes() const {
  size_t bytes = 0;
  for (const auto& shard : shards_) bytes += shard->state_bytes();
  return bytes;
}

size_t ZeroOptimizer::unsharded_state_bytes() const {
  size_t slots_kept = 0;
  for (size_t s = 0; s < slots().size(); ++s) slots_kept += shards_[0]->state(s, 0, 0).defined() ? 1 : 0;
  return slots_kept * total_ * sizeof(float) * group_.num_replicas();
}

std::unique_ptr<optim::Optimizer> make_replica_optimizer(ReplicaGroup& group, std::string_view name,
                                                         const optim::OptimizerSettings& settings) {
  if (group.options().zero == 1) return std::make_unique<ZeroOptimizer>(group, name, settings);
  return optim::make_optimizer(name, replica_params_of(group), settings);
}

void ZeroOptimizer::update(const Tensor& /*param*/, const Tensor& /*grad*/, std::vector<Tensor>& /*state*/) {
  throw std::logic_error("ZeroOptimizer steps slices, not parameters: step() is its own");
}

}  // namespace dpt::parallel
