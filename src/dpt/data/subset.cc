#include "dpt/data/subset.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "dpt/data/loader.h"

namespace dpt::data {

Subset::Subset(std::shared_ptr<const Dataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  const int64_t n = base_->size();
  for (const int64_t i : indices_) {
    if (i < 0 || i >= n) {
      throw std::out_of_range("Subset: example " + std::to_string(i) + " of a data set of " + std::to_string(n));
    }
  }
}

void Subset::fill(std::span<const int64_t> indices, const Draw& draw, float* images, int64_t* labels) const {
  std::vector<int64_t> mapped(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) mapped[i] = indices_[static_cast<size_t>(indices[i])];
  base_->fill(mapped, draw, images, labels);
}

std::shared_ptr<const Dataset> first_examples(std::shared_ptr<const Dataset> data, int64_t count) {
  if (count < 1) throw std::invalid_argument("a subset needs at least one example, got " + std::to_string(count));
  if (count >= data->size()) return data;
  std::vector<int64_t> indices(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) indices[static_cast<size_t>(i)] = i;
  return std::make_shared<Subset>(std::move(data), std::move(indices));
}

SplitPair hold_out(std::shared_ptr<const Dataset> data, double fraction, uint64_t seed) {
  if (!(fraction > 0 && fraction < 1)) {
    throw std::invalid_argument("a held-out fraction must lie between 0 and 1, got " + std::to_string(fraction));
  }
  const int64_t n = data->size();
  const auto held = static_cast<int64_t>(std::llround(fraction * static_cast<double>(n)));
  // The same shuffle as the loader's, on an epoch no training pass uses.
  std::vector<int64_t> order = epoch_order(n, /*shuffle=*/true, seed, /*epoch=*/-1);
  std::vector<int64_t> test(order.begin(), order.begin() + held);
  std::vector<int64_t> train(order.begin() + held, order.end());
  // Each part keeps the data's own order, so a cut does not also reorder it.
  std::sort(test.begin(), test.end());
  std::sort(train.begin(), train.end());
  return {std::make_shared<Subset>(data, std::move(train)), std::make_shared<Subset>(data, std::move(test))};
}

}  // namespace dpt::data
