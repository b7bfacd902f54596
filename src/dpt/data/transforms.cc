#include "dpt/data/transforms.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "dpt/data/loader.h"

namespace dpt::data {
namespace {

class RandomCrop : public Transform {
 public:
  explicit RandomCrop(int64_t padding) : padding_(padding) {
    if (padding < 1) throw std::invalid_argument("random_crop: padding must be at least 1, got " + std::to_string(padding));
  }
  bool random() const override { return true; }
  void apply(float* image, const ImageShape& s, std::mt19937_64& rng) const override {
    const uint64_t window = static_cast<uint64_t>(2 * padding_ + 1);
    const int64_t dy = static_cast<int64_t>(uniform_below(rng, window)) - padding_;
    const int64_t dx = static_cast<int64_t>(uniform_below(rng, window)) - padding_;
    std::vector<float> plane(static_cast<size_t>(s.height * s.width));
    for (int64_t c = 0; c < s.channels; ++c) {
      float* channel = image + c * s.height * s.width;
      std::copy(channel, channel + plane.size(), plane.begin());
      for (int64_t y = 0; y < s.height; ++y) {
        for (int64_t x = 0; x < s.width; ++x) {
          const int64_t sy = y + dy, sx = x + dx;  // outside the image: the zero padding
          const bool inside = sy >= 0 && sy < s.height && sx >= 0 && sx < s.width;
          channel[y * s.width + x] = inside ? plane[static_cast<size_t>(sy * s.width + sx)] : 0.0f;
        }
      }
    }
  }

 private:
  int64_t padding_;
};

class HFlip : public Transform {
 public:
  bool random() const override { return true; }
  void apply(float* image, const ImageShape& s, std::mt19937_64& rng) const override {
    if (uniform_below(rng, 2) == 0) return;
    for (int64_t row = 0; row < s.channels * s.height; ++row) std::reverse(image + row * s.width, image + (row + 1) * s.width);
  }
};

class Normalize : public Transform {
 public:
  Normalize(std::vector<float> mean, std::vector<float> stddev) : mean_(std::move(mean)), stddev_(std::move(stddev)) {
    if (mean_.empty() || mean_.size() != stddev_.size()) {
      throw std::invalid_argument("normalize: give as many standard deviations as means (one per channel, or one)");
    }
    for (const float s : stddev_) {
      if (!(s > 0)) throw std::invalid_argument("normalize: a standard deviation must be > 0, got " + std::to_string(s));
    }
  }
  bool random() const override { return false; }
  void apply(float* image, const ImageShape& s, std::mt19937_64&) const override {
    if (mean_.size() != 1 && static_cast<int64_t>(mean_.size()) != s.channels) {
      throw std::invalid_argument("normalize: " + std::to_string(mean_.size()) + " means for images of " +
                                  std::to_string(s.channels) + " channels");
    }
    const int64_t plane = s.height * s.width;
    for (int64_t c = 0; c < s.channels; ++c) {
      const size_t k = mean_.size() == 1 ? 0 : static_cast<size_t>(c);
      const float m = mean_[k], inv = 1.0f / stddev_[k];
      for (float* v = image + c * plane; v < image + (c + 1) * plane; ++v) *v = (*v - m) * inv;
    }
  }
  void describe(DataInfo& info) const override {
    const size_t channels = static_cast<size_t>(info.shape.channels);
    info.mean = mean_.size() == 1 ? std::vector<float>(channels, mean_[0]) : mean_;
    info.stddev = stddev_.size() == 1 ? std::vector<float>(channels, stddev_[0]) : stddev_;
  }

 private:
  std::vector<float> mean_, stddev_;
};

}  // namespace

std::shared_ptr<const Transform> random_crop(int64_t padding) { return std::make_shared<RandomCrop>(padding); }
std::shared_ptr<const Transform> hflip() { return std::make_shared<HFlip>(); }
std::shared_ptr<const Transform> normalize(std::vector<float> mean, std::vector<float> stddev) {
  return std::make_shared<Normalize>(std::move(mean), std::move(stddev));
}

ChannelStats channel_stats(const Dataset& data) {
  const ImageShape shape = data.shape();
  const int64_t plane = shape.height * shape.width, chunk = 256;
  std::vector<double> sum(static_cast<size_t>(shape.channels)), square(sum.size());
  std::vector<float> images;
  std::vector<int64_t> indices, labels;
  for (int64_t begin = 0; begin < data.size(); begin += chunk) {
    const int64_t n = std::min(chunk, data.size() - begin);
    indices.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) indices[static_cast<size_t>(i)] = begin + i;
    images.resize(static_cast<size_t>(n * shape.numel()));
    labels.resize(static_cast<size_t>(n));
    data.fill(indices, Draw{}, images.data(), labels.data());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t c = 0; c < shape.channels; ++c) {
        const float* v = images.data() + i * shape.numel() + c * plane;
        double s = 0, q = 0;
        for (int64_t p = 0; p < plane; ++p) s += v[p], q += static_cast<double>(v[p]) * v[p];
        sum[static_cast<size_t>(c)] += s;
        square[static_cast<size_t>(c)] += q;
      }
    }
  }
  ChannelStats stats;
  const double count = static_cast<double>(data.size() * plane);
  for (size_t c = 0; c < sum.size(); ++c) {
    const double mean = count > 0 ? sum[c] / count : 0;
    const double variance = count > 0 ? std::max(square[c] / count - mean * mean, 0.0) : 1;
    stats.mean.push_back(static_cast<float>(mean));
    stats.stddev.push_back(static_cast<float>(std::max(std::sqrt(variance), 1e-6)));
  }
  return stats;
}

TransformedDataset::TransformedDataset(std::shared_ptr<const Dataset> base,
                                       std::vector<std::shared_ptr<const Transform>> transforms)
    : base_(std::move(base)), shape_(base_->shape()), transforms_(std::move(transforms)) {}

DataInfo TransformedDataset::info() const {
  DataInfo info = base_->info();
  for (const auto& t : transforms_) t->describe(info);
  return info;
}

void TransformedDataset::fill(std::span<const int64_t> indices, const Draw& draw, float* images,
                              int64_t* labels) const {
  base_->fill(indices, draw, images, labels);
  const ImageShape& shape = shape_;
  for (size_t i = 0; i < indices.size(); ++i) {
    std::mt19937_64 rng(mix64(mix64(mix64(draw.seed) ^ static_cast<uint64_t>(draw.epoch)) ^
                              static_cast<uint64_t>(indices[i])));
    float* image = images + static_cast<int64_t>(i) * shape.numel();
    for (const auto& t : transforms_) {
      if (!t->random() || draw.augment) t->apply(image, shape, rng);
    }
  }
}

std::shared_ptr<const Dataset> transformed(std::shared_ptr<const Dataset> base,
                                           std::vector<std::shared_ptr<const Transform>> transforms) {
  return std::make_shared<TransformedDataset>(std::move(base), std::move(transforms));
}

}  // namespace dpt::data
