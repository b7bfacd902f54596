#include "dpt/train/train_concise.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "dpt/parallel/process_group.h"

namespace dpt::train {
namespace {

// DataParallel and its optimizer as the training loop drives them. Checkpoints hold the
// first replica's parameters, buffers and optimizer state: after every step all replicas
// hold the same ones.
class DataParallelTrainable : public Trainable {
 public:
  DataParallelTrainable(parallel::DataParallel& net, optim::Optimizer& optimizer) : net_(net), optimizer_(optimizer) {}

  StepResult compute_gradients(const Tensor& X, const Tensor& y) override {
    return net_.forward_backward(X, y);  // zeroes the previous gradients first
  }
  void compute_batch_gradients(const data::Batch& batch, parallel::GradientSync sync) override {
    net_.queue_forward_backward(batch, sync);
  }
  void check_finite(int64_t tag) override { net_.check_finite(tag); }
  parallel::StepLedger read_ledger() override { return net_.read_ledger(); }
  bool ledger_reads_are_free() const override { return net_.group().ledger_reads_are_free(); }
  std::pair<int64_t, int64_t> data_shard() const override {
    const parallel::ProcessGroup& group = net_.process_group();
    return {group.rank, group.size()};
  }
  int64_t deterministic_chunk() const override { return net_.group().options().deterministic_chunk; }
  const parallel::ProcessGroup& process_group() const override { return net_.process_group(); }
  parallel::WireBytes wire_bytes() const override { return net_.group().wire_bytes(); }
  int agree_on_stop(int signal) override { return parallel::agree_on_stop(net_.process_group(), signal); }
  std::vector<std::pair<std::string, Tensor>> named_gradients() const override {
    std::vector<std::pair<std::string, Tensor>> grads;
    for (const auto& [name, p] : net_.module().named_parameters()) grads.emplace_back(name, p.grad());
    return grads;
  }
  void apply_update() override { optimizer_.step(); }
  void set_learning_rate(float lr) override { optimizer_.set_lr(lr); }
  double evaluate(const data::Dataset& data, int64_t batch_size) override {
    return static_cast<double>(net_.count_correct(data, batch_size)) / static_cast<double>(data.size());
  }
  void set_training(bool on) override { net_.train(on); }
  std::vector<std::string> device_names() const override {
    return parallel::device_names(net_.devices(), net_.process_group());
  }

  void save_state(checkpoint::Checkpoint& into) const override {
    optimizer_.gather_state();  // a sharded optimizer's collective: every rank is here
    const nn::Module& first = net_.replica(0);
    const auto params = first.named_parameters();
    for (const auto& [name, t] : params) into.params.push_back(checkpoint::to_named(name, t));
    for (const auto& [name, t] : first.named_buffers()) into.buffers.push_back(checkpoint::to_named(name, t));
    into.optimizer = optimizer_.name();
    into.optimizer_steps = optimizer_.steps();
    for (size_t s = 0; s < optimizer_.slots().size(); ++s) {
      for (size_t i = 0; i < params.size(); ++i) {
        const Tensor& v = optimizer_.state(s, 0, i);
        if (v.defined()) into.optimizer_state.push_back(checkpoint::to_named(optimizer_.slots()[s] + "/" + params[i].first, v));
      }
    }
  }

  void load_state(const checkpoint::Checkpoint& from, const std::string& source) override {
    for (size_t r = 0; r < net_.devices().size(); ++r) {
      const nn::Module& replica = net_.replica(r);
      checkpoint::copy_into(from.params, replica.named_parameters(), "parameters", source);
      checkpoint::copy_into(from.buffers, replica.named_buffers(), "buffers", source);
    }
    if (from.optimizer != optimizer_.name()) {
      throw checkpoint::CheckpointError("checkpoint " + source + " was written with optimizer " + from.optimizer +
                                        ", this run uses " + optimizer_.name() + "; resume with `optimizer` " +
                                        from.optimizer + " or start afresh");
    }
    // State exists only for parameters the optimizer has stepped.
    const auto params = net_.module().named_parameters();
    const std::vector<std::string>& slots = optimizer_.slots();
    std::vector<std::vector<Tensor>> state(slots.size(), std::vector<Tensor>(params.size()));
    for (const checkpoint::NamedTensor& saved : from.optimizer_state) {
      const size_t slash = saved.name.find('/');
      const std::string slot = saved.name.substr(0, slash), param = saved.name.substr(slash + 1);
      const size_t s = static_cast<size_t>(std::find(slots.begin(), slots.end(), slot) - slots.begin());
      size_t i = 0;
      while (i < params.size() && params[i].first != param) ++i;
      if (s == slots.size() || i == params.size() || params[i].second.shape() != saved.shape) {
        throw checkpoint::CheckpointError("checkpoint " + source + " holds optimizer state " + saved.name + " " +
                                          shape_str(saved.shape) + ", which " + optimizer_.name() +
                                          " keeps no such slot or the model has no such parameter for");
      }
      state[s][i] = Tensor::from_vector(saved.values, saved.shape);
    }
    optimizer_.load_state(state, from.optimizer_steps);
  }

 private:
  parallel::DataParallel& net_;
  optim::Optimizer& optimizer_;
};

// The optimizer must step the model's own replicas, or training would update nothing.
void check_steps_the_model(parallel::DataParallel& net, const optim::Optimizer& optimizer) {
  const std::vector<std::vector<Tensor>> expected = net.replica_parameters();
  const std::vector<std::vector<Tensor>>& given = optimizer.replica_parameters();
  bool same = expected.size() == given.size();
  for (size_t r = 0; same && r < expected.size(); ++r) {
    same = expected[r].size() == given[r].size();
    for (size_t i = 0; same && i < expected[r].size(); ++i) same = expected[r][i].same_as(given[r][i]);
  }
  if (!same) {
    throw std::invalid_argument("the optimizer steps other parameters than the model's; build it from this "
                                "DataParallel's replica_parameters()");
  }
}

}  // namespace

TrainHistory train(parallel::DataParallel& net, optim::Optimizer& optimizer, const data::Dataset& train_data,
                   const data::Dataset& test_data, const TrainOptions& options, const EpochCallback& on_epoch,
                   const StepCallback& on_step) {
  check_steps_the_model(net, optimizer);
  DataParallelTrainable trainable(net, optimizer);
  const LoopResult result = run_training(trainable, train_data, test_data, options, optimizer.lr(), on_epoch, on_step);
  TrainHistory history;
  history.epochs = result.history;
  history.skipped_steps = result.skipped_steps;
  if (result.train_seconds > 0) {
    history.examples_per_sec = static_cast<double>(result.examples_trained) / result.train_seconds;
  }
  return history;
}

}  // namespace dpt::train
