#include "dpt/data/in_memory.h"

#include <algorithm>
#include <stdexcept>

namespace dpt::data {

std::vector<std::string> numbered_classes(int64_t count) {
  std::vector<std::string> names;
  for (int64_t c = 0; c < count; ++c) names.push_back(std::to_string(c));
  return names;
}

std::string class_difference(const std::vector<std::string>& a, const std::string& a_name,
                             const std::vector<std::string>& b, const std::string& b_name) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i] != b[i]) return "class " + std::to_string(i) + " is '" + a[i] + "' in " + a_name + ", '" + b[i] + "' in " + b_name;
  }
  if (a.size() == b.size()) return "";
  return std::to_string(a.size()) + " classes in " + a_name + ", " + std::to_string(b.size()) + " in " + b_name;
}

DataInfo InMemoryDataset::info() const {
  DataInfo info;
  info.shape = {channels, rows, cols};
  if (!class_names.empty()) {
    info.classes = class_names;
  } else {
    const auto most = std::max_element(labels.begin(), labels.end());
    info.classes = numbered_classes(most == labels.end() ? 0 : *most + 1);
  }
  info.light_on_dark = light_on_dark;
  return info;
}

void InMemoryDataset::fill(std::span<const int64_t> indices, const Draw&, float* images, int64_t* out_labels) const {
  const int64_t image = channels * rows * cols;
  for (size_t b = 0; b < indices.size(); ++b) {
    const int64_t example = indices[b];
    float* dst = images + static_cast<int64_t>(b) * image;
    if (!pixels.empty()) {
      const uint8_t* src = pixels.data() + example * image;
      for (int64_t p = 0; p < image; ++p) dst[p] = static_cast<float>(src[p]) / 255.0f;
    } else {
      std::copy_n(values.data() + example * image, image, dst);
    }
    out_labels[b] = labels[static_cast<size_t>(example)];
  }
}

InMemoryDataset from_tensors(const Tensor& images, const Tensor& labels, std::vector<std::string> classes) {
  if (images.ndim() != 4 || images.dtype() != DType::f32) {
    throw std::invalid_argument("from_tensors: images must be f32 [N, C, H, W], got " + shape_str(images.shape()));
  }
  if (labels.ndim() != 1 || labels.dtype() != DType::i64 || labels.dim(0) != images.dim(0)) {
    throw std::invalid_argument("from_tensors: labels must be i64 [" + std::to_string(images.dim(0)) +
                                "], one per image, got " + shape_str(labels.shape()));
  }
  InMemoryDataset data;
  data.channels = images.dim(1);
  data.rows = images.dim(2);
  data.cols = images.dim(3);
  const Tensor host_images = images.to(Device::cpu());
  const Tensor host_labels = labels.to(Device::cpu());
  data.values.assign(host_images.data<float>(), host_images.data<float>() + host_images.numel());
  data.labels.assign(host_labels.data<int64_t>(), host_labels.data<int64_t>() + host_labels.numel());
  const int64_t count = static_cast<int64_t>(classes.size());
  for (size_t i = 0; i < data.labels.size(); ++i) {
    if (data.labels[i] < 0 || data.labels[i] >= count) {
      throw std::invalid_argument("from_tensors: label " + std::to_string(data.labels[i]) + " at index " +
                                  std::to_string(i) + " is outside the " + std::to_string(count) +
                                  " classes given; pass one name per class");
    }
  }
  data.class_names = std::move(classes);
  return data;
}

InMemoryDataset take_first(const InMemoryDataset& data, int64_t count) {
  if (count < 1) throw std::invalid_argument("a subset needs at least one example, got " + std::to_string(count));
  const int64_t n = std::min(count, data.size());
  const int64_t image = data.channels * data.rows * data.cols;
  InMemoryDataset subset = data;
  subset.pixels.clear();
  subset.values.clear();
  if (!data.pixels.empty()) subset.pixels.assign(data.pixels.begin(), data.pixels.begin() + n * image);
  else subset.values.assign(data.values.begin(), data.values.begin() + n * image);
  subset.labels.assign(data.labels.begin(), data.labels.begin() + n);
  // A subset keeps its parent's classes, even those it holds no example of.
  if (subset.class_names.empty()) subset.class_names = data.info().classes;
  return subset;
}

}  // namespace dpt::data
