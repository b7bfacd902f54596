// Fashion-MNIST (Zalando): 28x28 grey-scale images of clothing in 10 classes, 60,000 for
// training and 10,000 for testing, a light object on a dark background; the lesson's
// workload, and what Debian ships in the package dataset-fashion-mnist. Header-only facts,
// so that the checkpoint reader (and its fuzzer) can name them without the data layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/data/dataset.h"

namespace dpt::data {

constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";
inline constexpr ImageShape kFashionMnistShape{1, 28, 28};
inline constexpr int64_t kFashionMnistClasses = 10;

// The 10 class names, indexed by label: "t-shirt", "trouser", ..., "ankle boot".
inline std::vector<std::string> class_names() {
  return {"t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot"};
}

// The 10 class names as the data set's authors write them, indexed by label:
// "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
// "Bag", "Ankle boot".
inline std::vector<std::string> class_titles() {
  return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
}

// Fashion-MNIST as a model trained on it records it: 1x28x28, light on dark, class_titles().
inline DataInfo fashion_mnist_info() {
  DataInfo info;
  info.shape = kFashionMnistShape;
  info.classes = class_titles();
  info.light_on_dark = true;
  return info;
}

}  // namespace dpt::data
