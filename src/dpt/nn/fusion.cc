#include "dpt/nn/fusion.h"

#include "dpt/nn/layers.h"
#include "dpt/ops/ops.h"
#include "dpt/ops/precision.h"

namespace dpt::nn {

namespace {

template <class Layer>
Layer* layer_at(const std::vector<Module*>& layers, size_t i) {
  return i < layers.size() ? dynamic_cast<Layer*>(layers[i]) : nullptr;
}

// Runs the fused op that starts at layers[i], if the pass matches one there, and returns
// how many layers it ran (0: none matched).
size_t run_fused_at(const std::vector<Module*>& layers, size_t i, Tensor& h) {
  if (auto* conv = layer_at<Conv2d>(layers, i)) {
    const auto* pool = layer_at<AvgPool2d>(layers, i + 2);
    if (layer_at<ReLU>(layers, i + 1)) {
      if (pool && pool->kernel() == pool->stride()) {
        h = conv->forward_relu_avg_pool(h, pool->kernel());
        return 3;
      }
      h = conv->forward_relu(h);
      return 2;
    }
    if (auto* bn = layer_at<BatchNorm2d>(layers, i + 1); bn && layer_at<ReLU>(layers, i + 2)) {
      h = conv_bn_relu(*conv, *bn, h);
      return 3;
    }
  }
  if (auto* bn = layer_at<BatchNorm2d>(layers, i); bn && layer_at<ReLU>(layers, i + 1)) {
    h = bn->forward_relu(h);
    return 2;
  }
  return 0;
}
}  // namespace

bool layer_fusion_enabled() { return ops::execution().fusion; }

Tensor run_layers(const std::vector<Module*>& layers, const Tensor& x) {
  Tensor h = x;
  const bool fuse = layer_fusion_enabled();
  for (size_t i = 0; i < layers.size();) {
    const size_t fused = fuse ? run_fused_at(layers, i, h) : 0;
    if (fused == 0) h = layers[i]->forward(h);
    i += fused == 0 ? 1 : fused;
  }
  return h;
}

Tensor conv_bn_relu(Conv2d& conv, BatchNorm2d& bn, const Tensor& x) {
  if (!layer_fusion_enabled()) return ops::relu(bn.forward(conv.forward(x)));
  // A folded BatchNorm is the identity: its ReLU joins the convolution.
  if (bn.folded()) return conv.forward_relu(x);
  return bn.forward_relu(conv.forward(x));
}

Tensor bn_add_relu(BatchNorm2d& bn, const Tensor& z, const Tensor& shortcut) {
  if (!layer_fusion_enabled()) return ops::relu(ops::add(bn.forward(z), shortcut));
  return ops::add_relu(bn.forward(z), shortcut);
}

}  // namespace dpt::nn
