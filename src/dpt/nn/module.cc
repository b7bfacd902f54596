#include "dpt/nn/module.h"

#include <stdexcept>

namespace dpt::nn {

namespace {
Tensor deep_copy(const Tensor& t) {
  Tensor copy = t.clone();
  copy.set_requires_grad(t.requires_grad()).set_name(t.name());
  return copy;
}
}  // namespace

Module::Module(const Module& other) : training_(other.training_) {
  for (const auto& [name, t] : other.params_) params_.emplace_back(name, deep_copy(t));
  for (const auto& [name, t] : other.buffers_) buffers_.emplace_back(name, deep_copy(t));
  for (const auto& [name, c] : other.children_) children_.emplace_back(name, c->clone());
}

void Module::synchronize_batch_norm(std::shared_ptr<const ops::ReplicaSum> sum) {
  for (const auto& [name, c] : children_) c->synchronize_batch_norm(sum);
}

namespace {
// The tensor's handle stays (parameter lists and optimizers keep working); its storage is
// swapped for a copy on `device`.
void move_in_place(const Tensor& t, Device device) {
  if (t.device() == device) return;
  t.adopt_storage(t.to(device));
}
}  // namespace

void Module::to(Device device) {
  for (const auto& [name, t] : params_) move_in_place(t, device);
  for (const auto& [name, t] : buffers_) move_in_place(t, device);
  for (const auto& [name, c] : children_) c->to(device);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(const std::string& prefix) const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t);
  for (const auto& [name, c] : children_) {
    for (auto& entry : c->named_parameters(prefix + name + ".")) out.push_back(std::move(entry));
  }
  return out;
}

std::vector<std::pair<std::string, const Module*>> Module::named_children() const {
  std::vector<std::pair<std::string, const Module*>> out;
  for (const auto& [name, c] : children_) out.emplace_back(name, c.get());
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (const auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(const std::string& prefix) const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : buffers_) out.emplace_back(prefix + name, t);
  for (const auto& [name, c] : children_) {
    for (auto& entry : c->named_buffers(prefix + name + ".")) out.push_back(std::move(entry));
  }
  return out;
}

std::vector<Tensor> Module::buffers() const {
  std::vector<Tensor> out;
  for (const auto& [name, t] : named_buffers()) out.push_back(t);
  return out;
}

void Module::fold_batch_norms() {
  for (auto& [name, c] : children_) c->fold_batch_norms();
}

void Module::set_step_context(const StepContext& context) {
  context_ = context;
  for (auto& [name, child] : children_) child->set_step_context(context);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, c] : children_) c->train(on);
}

void Module::zero_grad() const {
  for (const Tensor& p : parameters()) p.zero_grad();
}

// A name or tensor registered twice would give the optimizer and the allreduce one
// parameter twice, and checkpoints two entries of one name.
void Module::check_new_name(const std::string& name, const Tensor* t) const {
  const auto taken = [&](const auto& list) {
    for (const auto& [n, existing] : list) {
      if (n == name) return "the name '" + name + "' is taken";
      if (t && existing.same_as(*t)) return "this tensor is registered already, as '" + n + "'";
    }
    return std::string();
  };
  std::string problem = taken(params_);
  if (problem.empty()) problem = taken(buffers_);
  for (const auto& [n, child] : children_) {
    if (problem.empty() && n == name) problem = "the name '" + name + "' is taken by a child module";
  }
  if (!problem.empty()) {
    throw std::invalid_argument("cannot register '" + name + "': " + problem +
                                "; give each parameter, buffer and child its own name and tensor");
  }
}

size_t Module::register_parameter(std::string name, Tensor t) {
  check_new_name(name, &t);
  t.set_requires_grad(true);
  if (t.name().empty()) t.set_name(name);
  params_.emplace_back(std::move(name), std::move(t));
  return params_.size() - 1;
}

size_t Module::register_buffer(std::string name, Tensor t) {
  check_new_name(name, &t);
  buffers_.emplace_back(std::move(name), std::move(t));
  return buffers_.size() - 1;
}

void Module::register_module(std::string name, std::unique_ptr<Module> child) {
  check_new_name(name, nullptr);
  children_.emplace_back(std::move(name), std::move(child));
}

}  // namespace dpt::nn
