// Dataset: labelled images, whatever their format. Everything above data/ (the seeded
// loader, split evaluation, the replica engine, the training loop, evaluate, predict and
// export) sees data only through this interface, so a model trains on IDX files, CIFAR
// batches, an image folder, NumPy arrays or a user's own class alike.
//
// An example is a float image of shape() (channels x height x width, plain row-major per
// channel) and a label in [0, num_classes()). fill() is a pure function of the example
// indices and the Draw: the same example becomes the same floats on any device count,
// in any process, and after a resume.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dpt/core/image_shape.h"

namespace dpt::data {

// What a model trained on a data set must know to read new pictures as training read them.
// Checkpoints record it; evaluate, predict and export take it from there.
struct DataInfo {
  ImageShape shape;
  std::vector<std::string> classes;  // class names, indexed by label: their count is the class count
  // Polarity: Fashion-MNIST and MNIST draw a light object on a dark background. A picture
  // given to predict is inverted to match only when the training data was recorded so.
  bool light_on_dark = false;
  // The per-channel normalization applied after scaling to [0, 1]: (v - mean) / std.
  // Empty: none (the values stay in [0, 1]).
  std::vector<float> mean;
  std::vector<float> stddev;
};

// The randomness of one pass over the data: random transforms (data/transforms.h) draw from
// (seed, epoch, example index) alone. `augment` is false for evaluation, where random
// transforms leave the example as it is.
struct Draw {
  uint64_t seed = 0;
  int64_t epoch = 0;
  bool augment = false;
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  virtual DataInfo info() const = 0;

  // Writes examples `indices` (each in [0, size())) to `images`, indices.size() *
  // shape().numel() floats, and their labels to `labels`. Called from several threads at
  // once (prefetching, one call per thread); implementations must not change shared state.
  virtual void fill(std::span<const int64_t> indices, const Draw& draw, float* images, int64_t* labels) const = 0;

  ImageShape shape() const { return info().shape; }
  int64_t num_classes() const { return static_cast<int64_t>(info().classes.size()); }
};

// "0", "1", ..., the names of classes that have none of their own.
std::vector<std::string> numbered_classes(int64_t count);

// How two lists of class names differ, for a message: "class 4 is 'Coat' in A, 'coat' in
// B" for the first name that differs, else "10 classes in A, 11 in B"; "" when equal.
std::string class_difference(const std::vector<std::string>& a, const std::string& a_name,
                             const std::vector<std::string>& b, const std::string& b_name);

}  // namespace dpt::data
