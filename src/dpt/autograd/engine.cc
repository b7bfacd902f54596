#include "dpt/autograd/engine.h"

#include <atomic>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "dpt/autograd/node.h"

namespace dpt::autograd {

namespace {
thread_local bool t_grad_enabled = true;
thread_local const GradReadyHook* t_grad_ready_hook = nullptr;

void add_on_host(const Tensor& into, const Tensor& from) {
  if (into.device().kind != Device::Kind::cpu || from.device().kind != Device::Kind::cpu) {
    throw std::logic_error("autograd: summing gradients on " + into.device().str() +
                           " needs the ops layer's kernels (link dpt_ops)");
  }
  float* out = into.data<float>();
  const float* in = from.data<float>();
  for (int64_t i = 0; i < into.numel(); ++i) out[i] += in[i];
}

std::atomic<GradientAdder> g_add_into{add_on_host};

// into += from, elementwise, on their device.
void add_into(const Tensor& into, const Tensor& from) { g_add_into.load()(into, from); }

void check_grad_shape(const Node& node, const Tensor& input, const Tensor& grad) {
  if (grad.numel() != input.numel()) {
    throw std::logic_error("autograd: " + node.op + " returned a gradient of shape " + shape_str(grad.shape()) +
                           " for an input of shape " + shape_str(input.shape()));
  }
}

// Nodes reachable from `root`, each after every node that consumes its output.
std::vector<Node*> reverse_topological_order(Node* root) {
  std::vector<Node*> order;
  std::unordered_set<Node*> visited;
  // Iterative post-order DFS: deep graphs (ResNet) must not overflow the stack.
  std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
  visited.insert(root);
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      const auto& input = node->inputs[next++];
      Node* producer = input.defined() ? input.grad_fn().get() : nullptr;
      if (producer && visited.insert(producer).second) stack.push_back({producer, 0});
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }
  return {order.rbegin(), order.rend()};
}
}  // namespace

bool grad_enabled() { return t_grad_enabled; }

void set_gradient_adder(GradientAdder adder) { g_add_into.store(adder); }

GradReadyHookGuard::GradReadyHookGuard(GradReadyHook hook) : hook_(std::move(hook)), previous_(t_grad_ready_hook) {
  t_grad_ready_hook = &hook_;
}
GradReadyHookGuard::~GradReadyHookGuard() { t_grad_ready_hook = previous_; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

bool should_record(std::initializer_list<const Tensor*> inputs) {
  if (!t_grad_enabled) return false;
  for (const Tensor* t : inputs) {
    if (t && t->defined() && t->needs_grad()) return true;
  }
  return false;
}

void record(Tensor& output, std::string op, std::initializer_list<const Tensor*> inputs, BackwardFn backward) {
  auto node = std::make_shared<Node>();
  node->op = std::move(op);
  for (const Tensor* t : inputs) {
    node->inputs.push_back(t && t->defined() && t->needs_grad() ? *t : Tensor());
  }
  node->backward = std::move(backward);
  output.set_grad_fn(std::move(node));
}

void backward(const Tensor& root) {
  if (!root.defined() || root.numel() != 1) {
    throw std::invalid_argument("backward() needs a one-element loss tensor, got shape " +
                                (root.defined() ? shape_str(root.shape()) : std::string("<undefined>")));
  }
  if (!root.needs_grad()) {
    throw std::invalid_argument("backward(): the loss does not depend on any tensor that requires grad");
  }
  const Tensor seed = Tensor::full(root.shape(), 1.0f, root.device());
  if (!root.grad_fn()) {  // the loss is itself a leaf
    if (!root.grad().defined())
      root.set_grad(seed);
    else
      add_into(root.grad(), seed);
    if (t_grad_ready_hook && root.requires_grad()) (*t_grad_ready_hook)(root);
    return;
  }

  const std::vector<Node*> order = reverse_topological_order(root.grad_fn().get());
  // With a grad-ready hook: how many recorded uses of each leaf are still to be walked. A
  // leaf's gradient is final once the last node using it is done (or skipped).
  const GradReadyHook* hook = t_grad_ready_hook;
  std::unordered_map<const TensorImpl*, int> uses_left;
  const auto is_leaf = [](const Tensor& t) { return t.defined() && !t.grad_fn() && t.requires_grad(); };
  if (hook) {
    for (Node* node : order) {
      for (const Tensor& input : node->inputs) {
        if (is_leaf(input)) ++uses_left[input.impl()];
      }
    }
  }
  const auto leaf_uses_done = [&](Node* node) {
    if (!hook) return;
    for (const Tensor& input : node->inputs) {
      if (is_leaf(input) && --uses_left[input.impl()] == 0) (*hook)(input);
    }
  };

  std::unordered_map<Node*, Tensor> grad_of_output{{root.grad_fn().get(), seed}};
  std::unordered_set<Node*> owned_sums;
  for (Node* node : order) {
    auto found = grad_of_output.find(node);
    if (found == grad_of_output.end()) {  // no gradient flowed here
      leaf_uses_done(node);
      continue;
    }
    const Tensor grad_output = std::move(found->second);
    grad_of_output.erase(found);
    std::vector<Tensor> grads = node->backward(grad_output);
    if (grads.size() != node->inputs.size()) {
      throw std::logic_error("autograd: " + node->op + " returned the wrong number of gradients");
    }
    for (size_t i = 0; i < grads.size(); ++i) {
      const Tensor& input = node->inputs[i];
      if (!input.defined() || !grads[i].defined()) continue;
      check_grad_shape(*node, input, grads[i]);
      if (Node* producer = input.grad_fn().get()) {
        auto [slot, inserted] = grad_of_output.try_emplace(producer, grads[i]);
        // The first gradient may alias a buffer an op still holds (reshape and add pass
        // theirs through), so a sum gets its own copy before anything is added into it.
        if (!inserted) {
          if (owned_sums.insert(producer).second) slot->second = slot->second.clone();
          add_into(slot->second, grads[i]);
        }
      } else if (input.requires_grad()) {
        if (!input.grad().defined()) {
          // A copy: never alias a buffer the graph still uses.
          input.set_grad(grads[i].clone().with_shape(input.shape()));
        } else {
          add_into(input.grad(), grads[i]);
        }
      }
    }
    leaf_uses_done(node);
  }
}

}  // namespace dpt::autograd
