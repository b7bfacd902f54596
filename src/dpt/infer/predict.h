// Classifying pictures with a trained model: a plain forward pass (eval mode, no
// gradients, on the host) and a softmax over the logits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/infer/image.h"
#include "dpt/nn/module.h"

namespace dpt::infer {

struct Prediction {
  std::vector<float> logits;
  std::vector<double> probabilities;  // softmax(logits)
  std::vector<int64_t> ranked;        // class indices, most probable first (ties: lower index first)
};

// Softmax computed stably (the largest logit subtracted first), in double.
std::vector<double> softmax(const std::vector<float>& logits);

// One prediction per image (each of `shape`), `net` run on batches of up to `batch_size` images.
std::vector<Prediction> predict(nn::Module& net, const std::vector<InputImage>& images, const ImageShape& shape,
                                int64_t batch_size = 256);

}  // namespace dpt::infer
