#include "dpt/train/train_concise.h"

#include <string>

#include "dpt/parallel/process_group.h"

namespace dpt::train {
namespace {

// DataParallel and its optimizer as the training loop drives them. Checkpoints hold the
// first replica's parameters, buffers and momentum: after every step all replicas hold
// the same ones.
class DataParallelTrainable : public Trainable {
 public:
  DataParallelTrainable(parallel::DataParallel& net, optim::SGD& optimizer) : net_(net), optimizer_(optimizer) {}

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
  bool writes_checkpoints() const override { return net_.process_group().is_root(); }
  int agree_on_stop(int signal) override { return parallel::agree_on_stop(net_.process_group(), signal); }
  std::vector<uint64_t> gather_digests(uint64_t digest) override {
    return parallel::gather_digests(net_.process_group(), digest);
  }
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
    const nn::Module& first = net_.replica(0);
    const auto params = first.named_parameters();
    for (const auto& [name, t] : params) into.params.push_back(checkpoint::to_named(name, t));
    for (const auto& [name, t] : first.named_buffers()) into.buffers.push_back(checkpoint::to_named(name, t));
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& v = optimizer_.momentum_buffer(0, i);
      if (v.defined()) into.momentum.push_back(checkpoint::to_named(params[i].first, v));
    }
  }

  void load_state(const checkpoint::Checkpoint& from, const std::string& source) override {
    for (size_t r = 0; r < net_.devices().size(); ++r) {
      const nn::Module& replica = net_.replica(r);
      checkpoint::copy_into(from.params, replica.named_parameters(), "parameters", source);
      checkpoint::copy_into(from.buffers, replica.named_buffers(), "buffers", source);
    }
    // Momentum exists only for parameters the optimizer has stepped.
    const auto params = net_.module().named_parameters();
    std::vector<Tensor> momentum(params.size());
    for (const checkpoint::NamedTensor& saved : from.momentum) {
      size_t i = 0;
      while (i < params.size() && params[i].first != saved.name) ++i;
      if (i == params.size() || params[i].second.shape() != saved.shape) {
        throw checkpoint::CheckpointError("checkpoint " + source + " holds momentum for " + saved.name + " " +
                                          shape_str(saved.shape) + ", which the model has no such parameter for");
      }
      momentum[i] = Tensor::from_vector(saved.values, saved.shape);
    }
    optimizer_.load_momentum_buffers(momentum);
  }

 private:
  parallel::DataParallel& net_;
  optim::SGD& optimizer_;
};

}  // namespace

TrainHistory train(parallel::DataParallel& net, optim::SGD& optimizer, const data::Dataset& train_data,
                   const data::Dataset& test_data, const ConciseConfig& config, const EpochCallback& on_epoch,
                   const StepCallback& on_step) {
  DataParallelTrainable trainable(net, optimizer);
  const LoopSettings settings{config.epochs,      config.batch_size, config.seed,     optimizer.options().lr,
                              config.model,       config.schedule,   config.lr_scaling, config.accumulate};
  const LoopResult result = run_training(trainable, train_data, test_data, settings, config.run, on_epoch, on_step);
  TrainHistory history;
  history.epochs = result.history;
  history.skipped_steps = result.skipped_steps;
  if (result.train_seconds > 0) {
    history.examples_per_sec = static_cast<double>(result.examples_trained) / result.train_seconds;
  }
  return history;
}

}  // namespace dpt::train
