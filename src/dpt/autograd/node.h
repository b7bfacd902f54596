// The autograd record: every op that computes from a tensor needing gradients attaches a
// Node to its output. The node keeps the op's inputs and a function mapping the gradient of
// the output onto gradients of the inputs. Each worker thread builds its own graph; nothing
// here is shared between threads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpt/core/tensor.h"

namespace dpt::autograd {

// Returns one gradient per input, in the order of Node::inputs; an undefined Tensor for an
// input that needs none.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

struct Node {
  std::string op;                                   // "conv2d", for errors and profiles
  std::vector<Tensor> inputs;                       // undefined where the input needs no grad
  BackwardFn backward;
};

// True unless a NoGradGuard is alive on this thread.
bool grad_enabled();

// Turns recording off on this thread for its lifetime (evaluation, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// True when recording is on and any of `inputs` needs a gradient.
bool should_record(std::initializer_list<const Tensor*> inputs);

// Attaches a node for `op` to `output`. Tensors the backward function needs must be
// captured as detach()ed copies, so that the graph never points back at its own outputs.
void record(Tensor& output, std::string op, std::initializer_list<const Tensor*> inputs, BackwardFn backward);

}  // namespace dpt::autograd
