// The elementwise activations, one family behind ops::activation (ops.h) and the backends'
// activation_forward / activation_backward. Plain C++17: the CUDA kernels include it too.
//   relu     max(x, 0)
//   sigmoid  1 / (1 + exp(-x))
//   tanh     tanh(x)
//   gelu     x * Phi(x) = x / 2 * (1 + erf(x / sqrt(2))), the exact form (PyTorch's default)
#pragma once

namespace dpt::ops {

enum class Activation { relu, sigmoid, tanh, gelu };

inline const char* activation_name(Activation a) {
  switch (a) {
    case Activation::relu: return "relu";
    case Activation::sigmoid: return "sigmoid";
    case Activation::tanh: return "tanh";
    case Activation::gelu: return "gelu";
  }
  return "?";
}

}  // namespace dpt::ops
