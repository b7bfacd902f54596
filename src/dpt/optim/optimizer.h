// Optimizers behind one interface, with PyTorch's update rules (g: the gradient of the
// mean loss, which DataParallel's allreduce leaves; t: the updates taken, this one
// included):
//   SGD    d = g + weight_decay * p;  v = momentum * v + d (v = d on the first step);
//          d = nesterov ? d + momentum * v : v;  p -= lr * d
//   Adam   g += weight_decay * p (L2);  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//          p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//   AdamW  Adam with decoupled weight decay: p *= 1 - lr * weight_decay first, g unchanged
// An optimizer steps every replica of a data-parallel model: the replicas hold equal
// parameters and (after the allreduce) equal gradients, and each keeps its own state, so
// every replica makes the same update. Its state (per parameter: SGD's momentum, Adam's
// exp_avg and exp_avg_sq; and the step count) goes into checkpoints, so a resume is exact.
// A sharded optimizer (ZeRO, parallel/zero_optimizer.h) keeps a share of that state per
// replica instead: it overrides step, state, gather_state, load_state and state_bytes.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dpt/core/tensor.h"

namespace dpt::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every replica's parameters that has a gradient; then steps() counts it.
  virtual void step();
  void zero_grad();
  float lr() const { return lr_; }
  // The learning rate of the next step() (a schedule sets it per step); throws ConfigError
  // (`lr`) for a negative or non-finite one.
  void set_lr(float lr);

  // "sgd", "adam" or "adamw": what checkpoints record, and resuming checks.
  virtual std::string name() const = 0;
  // The per-parameter state, slot by slot ("momentum"; "exp_avg", "exp_avg_sq").
  const std::vector<std::string>& slots() const { return slots_; }
  // Slot `slot` of parameter `param` of replica `replica`: undefined until that parameter's
  // first update (SGD without momentum keeps none). A sharded optimizer answers after
  // gather_state().
  virtual const Tensor& state(size_t slot, size_t replica, size_t param) const;
  // Makes state() whole: a sharded optimizer gathers every replica's share (a collective:
  // every rank of a job calls it); nothing for the others.
  virtual void gather_state() {}
  // The bytes of state this process holds for all its replicas (what ZeRO divides).
  virtual size_t state_bytes() const;
  int64_t steps() const { return steps_; }
  // Every replica gets a copy of `values` (one list per slot, one tensor per parameter,
  // undefined where not stepped yet), and the step count: resuming from a checkpoint,
  // whatever the number of replicas that saved it. Throws std::invalid_argument for lists
  // of another length or tensors of another shape than the parameters'.
  virtual void load_state(const std::vector<std::vector<Tensor>>& values, int64_t steps);

  // The parameters it steps, one list per replica.
  const std::vector<std::vector<Tensor>>& replica_parameters() const { return params_; }

 protected:
  Optimizer(std::vector<std::vector<Tensor>> replica_params, float lr, std::vector<std::string> slots);
  template <class Options>
  static Options with_lr(Options options, float lr) {
    options.lr = lr;
    return options;
  }
  // The update of one parameter from its gradient; `state` holds its slots (undefined ones
  // not created yet). steps() already counts this update.
  virtual void update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& state) = 0;
  // For a step() of a subclass's own: counts it, or sets the count (load_state).
  void count_step() { ++steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  std::vector<std::vector<Tensor>> params_;              // [replica][param]
  std::vector<std::vector<std::vector<Tensor>>> state_;  // [replica][param][slot]
  std::vector<std::string> slots_;
  float lr_;
  int64_t steps_ = 0;
};

struct SgdOptions {
  float lr = 0.1f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;  // needs momentum > 0
};

class SGD : public Optimizer {
 public:
  // One parameter list per replica, in the same order on every replica. Throws
  // ConfigError naming the option for a momentum outside [0, 1), a negative weight decay,
  // or Nesterov without momentum.
  SGD(std::vector<std::vector<Tensor>> replica_params, SgdOptions options);
  SGD(std::vector<Tensor> params, SgdOptions options)
      : SGD(std::vector<std::vector<Tensor>>{std::move(params)}, options) {}
  std::string name() const override { return "sgd"; }
  // As constructed, with the current lr.
  SgdOptions options() const { return with_lr(options_, lr()); }

 private:
  void update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& state) override;
  SgdOptions options_;
};

struct AdamOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // Adam: L2 added to the gradient; AdamW: decoupled
};

class Adam : public Optimizer {
 public:
  // Throws ConfigError naming the option for betas outside [0, 1), eps <= 0 or a negative
  // weight decay.
  Adam(std::vector<std::vector<Tensor>> replica_params, AdamOptions options);
  Adam(std::vector<Tensor> params, AdamOptions options)
      : Adam(std::vector<std::vector<Tensor>>{std::move(params)}, options) {}
  std::string name() const override { return decoupled_ ? "adamw" : "adam"; }
  AdamOptions options() const { return with_lr(options_, lr()); }

 protected:
  Adam(std::vector<std::vector<Tensor>> replica_params, AdamOptions options, bool decoupled);

 private:
  void update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& state) override;
  AdamOptions options_;
  bool decoupled_;
};

// Adam with decoupled weight decay (Loshchilov and Hutter 2019); PyTorch's default decay.
class AdamW : public Adam {
 public:
  static constexpr AdamOptions kDefaults{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f};
  AdamW(std::vector<std::vector<Tensor>> replica_params, AdamOptions options = kDefaults)
      : Adam(std::move(replica_params), options, /*decoupled=*/true) {}
  AdamW(std::vector<Tensor> params, AdamOptions options = kDefaults)
      : AdamW(std::vector<std::vector<Tensor>>{std::move(params)}, options) {}
};

// Optimizers by name, for front ends (the CLI's --optimizer): the options of all of them;
// each takes what it uses.
inline constexpr std::array<std::string_view, 3> kOptimizers{"sgd", "adam", "adamw"};
// The state slots of optimizer `name` (Optimizer::slots): sgd's, or adam's and adamw's.
std::vector<std::string> optimizer_slots(std::string_view name);
struct OptimizerSettings {
  float lr = 0.1f;
  float momentum = 0.0f;      // sgd
  bool nesterov = false;      // sgd
  float weight_decay = 0.0f;  // all: SGD's and Adam's L2, AdamW's decoupled decay
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam, adamw
};
// Throws ConfigError (`optimizer`) for a name not in kOptimizers, and (`momentum`,
// `nesterov`) for SGD's settings given to Adam or AdamW.
void check_optimizer(std::string_view name, const OptimizerSettings& settings);
std::unique_ptr<Optimizer> make_optimizer(std::string_view name, std::vector<std::vector<Tensor>> replica_params,
                                          const OptimizerSettings& settings);

}  // namespace dpt::optim
