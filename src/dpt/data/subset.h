// Subset: some examples of another data set, by index, in the order given. What
// `train_limit`, `test_limit` and a held-out test split (`test_split`) cut from any format.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "dpt/data/dataset.h"

namespace dpt::data {

class Subset : public Dataset {
 public:
  // Throws std::out_of_range for an index outside `base`.
  Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices);

  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  DataInfo info() const override { return base_->info(); }
  void fill(std::span<const int64_t> indices, const Draw& draw, float* images, int64_t* labels) const override;

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> indices_;
};

// The first `count` examples of `data` (all of them when it has fewer; count > 0).
std::shared_ptr<const Dataset> first_examples(std::shared_ptr<const Dataset> data, int64_t count);

// `data` cut in two at random: a seeded `fraction` (0 < fraction < 1) of its examples held
// out as a test split, the rest for training; the same seed gives the same cut.
struct SplitPair {
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> test;
};
SplitPair hold_out(std::shared_ptr<const Dataset> data, double fraction, uint64_t seed);

}  // namespace dpt::data
