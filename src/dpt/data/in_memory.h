// InMemoryDataset: images held in memory, as bytes (scaled by 1/255 when read, as every
// 8-bit format stores them) or as floats (taken as they are), in NCHW order. Every format
// reader returns one, and a library user builds one from their own arrays or tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/core/tensor.h"
#include "dpt/data/dataset.h"

namespace dpt::data {

class InMemoryDataset : public Dataset {
 public:
  // Either pixels (size() * channels * rows * cols bytes, example-major, then channel,
  // row, column) or values (as many floats); pixels win when both are set.
  std::vector<uint8_t> pixels;
  std::vector<float> values;
  std::vector<int64_t> labels;  // one per example
  int64_t channels = 1, rows = 28, cols = 28;
  // Indexed by label; empty: "0".."max label" (numbered_classes), as IDX files carry no names.
  std::vector<std::string> class_names;
  bool light_on_dark = false;  // DataInfo::light_on_dark

  int64_t size() const override { return static_cast<int64_t>(labels.size()); }
  DataInfo info() const override;
  void fill(std::span<const int64_t> indices, const Draw& draw, float* images, int64_t* labels) const override;
};

// A data set of `images` (f32 [N, C, H, W] on the host, values taken as they are) and
// `labels` (i64 [N], each in [0, classes.size())). Throws std::invalid_argument naming the
// mismatch otherwise.
InMemoryDataset from_tensors(const Tensor& images, const Tensor& labels, std::vector<std::string> classes);

// The first `count` examples of `data` (all of them if it has fewer): a quick subset for
// smoke runs of large models. Throws std::invalid_argument for count < 1.
InMemoryDataset take_first(const InMemoryDataset& data, int64_t count);

}  // namespace dpt::data
