// Transforms: what happens to an example after its format reader made floats of it, in a
// chain that composes (torchvision's Compose, Flashlight's TransformDataset):
//   auto train = data::transformed(folder, {data::random_crop(4), data::hflip(), data::normalize(mean, std)});
// A random transform draws from a generator seeded by (seed, epoch, example index) alone,
// so an example becomes the same floats on any device count and after a resume; in
// evaluation (Draw::augment false) random transforms leave it as it is.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "dpt/data/dataset.h"

namespace dpt::data {

class Transform {
 public:
  virtual ~Transform() = default;
  // Changes one image of `shape` in place (transforms keep the shape).
  virtual void apply(float* image, const ImageShape& shape, std::mt19937_64& rng) const = 0;
  // Random transforms run only when a pass augments; the others always run.
  virtual bool random() const = 0;
  // What a model trained through this transform records about its input (normalization).
  virtual void describe(DataInfo& info) const { (void)info; }
};

// Pads by `padding` zeros on every side and cuts a random window of the original size.
std::shared_ptr<const Transform> random_crop(int64_t padding);
// Mirrors left to right with probability 1/2.
std::shared_ptr<const Transform> hflip();
// (v - mean[c]) / stddev[c] per channel c: one value per channel, or one for all.
std::shared_ptr<const Transform> normalize(std::vector<float> mean, std::vector<float> stddev);

// Every channel's mean and standard deviation over the examples of `data` (as read, with
// no augmentation): what normalize() takes to bring a training set to about 0 and 1.
struct ChannelStats {
  std::vector<float> mean;
  std::vector<float> stddev;
};
ChannelStats channel_stats(const Dataset& data);

// `base` with `transforms` applied to every example, in order.
class TransformedDataset : public Dataset {
 public:
  TransformedDataset(std::shared_ptr<const Dataset> base, std::vector<std::shared_ptr<const Transform>> transforms);

  int64_t size() const override { return base_->size(); }
  DataInfo info() const override;
  void fill(std::span<const int64_t> indices, const Draw& draw, float* images, int64_t* labels) const override;

 private:
  std::shared_ptr<const Dataset> base_;
  ImageShape shape_;  // base_'s, read once (info() may cost a pass over the labels)
  std::vector<std::shared_ptr<const Transform>> transforms_;
};

std::shared_ptr<const Dataset> transformed(std::shared_ptr<const Dataset> base,
                                           std::vector<std::shared_ptr<const Transform>> transforms);

}  // namespace dpt::data
