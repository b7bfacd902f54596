#include "dpt/infer/predict.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "dpt/autograd/node.h"

namespace dpt::infer {

std::vector<double> softmax(const std::vector<float>& logits) {
  std::vector<double> p(logits.size());
  if (logits.empty()) return p;
  const double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp(static_cast<double>(logits[i]) - top);
  for (double& v : p) v /= sum;
  return p;
}

std::vector<Prediction> predict(nn::Module& net, const std::vector<InputImage>& images, const ImageShape& shape,
                                int64_t batch_size) {
  net.eval();
  autograd::NoGradGuard no_grad;
  const auto kPixels = static_cast<size_t>(shape.numel());
  std::vector<Prediction> out;
  for (size_t first = 0; first < images.size(); first += static_cast<size_t>(batch_size)) {
    const size_t n = std::min(images.size() - first, static_cast<size_t>(batch_size));
    std::vector<float> batch;
    batch.reserve(n * kPixels);
    for (size_t i = first; i < first + n; ++i) batch.insert(batch.end(), images[i].pixels.begin(), images[i].pixels.end());
    const Tensor logits = net(Tensor::from_vector(batch, {static_cast<int64_t>(n), shape.channels, shape.height, shape.width}));
    const std::vector<float> values = logits.to_vector();
    const auto classes = static_cast<size_t>(logits.dim(1));
    for (size_t i = 0; i < n; ++i) {
      Prediction p;
      p.logits.assign(values.begin() + static_cast<std::ptrdiff_t>(i * classes),
                      values.begin() + static_cast<std::ptrdiff_t>((i + 1) * classes));
      p.probabilities = softmax(p.logits);
      p.ranked.resize(classes);
      std::iota(p.ranked.begin(), p.ranked.end(), 0);
      std::stable_sort(p.ranked.begin(), p.ranked.end(),
                       [&](int64_t a, int64_t b) { return p.probabilities[a] > p.probabilities[b]; });
      out.push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace dpt::infer
