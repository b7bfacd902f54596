#include "dpt/data/loader.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

namespace dpt::data {
namespace {

// SplitMix64 finaliser: spreads nearby inputs (seed 1 vs 2, epoch 3 vs 4) into unrelated
// generator seeds, so consecutive epochs do not get correlated streams.
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, n) without std::uniform_int_distribution, whose algorithm differs between
// standard libraries. Rejecting the lowest 2^64 mod n draws leaves a range whose size is a
// multiple of n, so the remainder is unbiased.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t rejected = (0 - n) % n;
  uint64_t draw = rng();
  while (draw < rejected) draw = rng();
  return draw % n;
}

}  // namespace

int64_t chunks_in(int64_t rows, int64_t chunk) { return (rows + chunk - 1) / chunk; }

RowRange shard_rows(int64_t rows, int64_t count, int64_t index, int64_t chunk) {
  if (count < 1 || index < 0 || index >= count) {
    throw std::out_of_range("shard " + std::to_string(index) + " of " + std::to_string(count) + " does not exist");
  }
  if (chunk < 1) throw std::out_of_range("chunks of " + std::to_string(chunk) + " rows do not exist");
  const int64_t units = chunks_in(rows, chunk);
  const int64_t base = units / count, extra = units % count;
  const int64_t begin = index * base + std::min(index, extra);
  const int64_t end = begin + base + (index < extra ? 1 : 0);
  return {std::min(begin * chunk, rows), std::min(end * chunk, rows)};
}

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return order;
  // Seeded from (seed, epoch) alone rather than from a generator carried across epochs,
  // so epoch e's order does not depend on how many epochs this process has run.
  std::mt19937_64 rng(mix64(mix64(seed) ^ static_cast<uint64_t>(epoch)));
  for (size_t i = order.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(uniform_below(rng, i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

BatchLoader::BatchLoader(const Dataset& data, int64_t batch_size, bool shuffle, uint64_t seed, bool augment)
    : data_(&data),
      shape_(data.shape()),
      size_(data.size()),
      batch_size_(batch_size),
      shuffle_(shuffle),
      seed_(seed),
      augment_(augment) {
  if (batch_size <= 0) {
    throw std::invalid_argument("batch size must be positive, got " + std::to_string(batch_size));
  }
  order_ = epoch_order(num_examples(), shuffle_, seed_, epoch_);
}

void BatchLoader::set_shard(int64_t index, int64_t count, int64_t chunk) {
  shard_rows(batch_size_, count, index, chunk);  // throws for a shard that does not exist
  shard_index_ = index;
  shard_count_ = count;
  shard_chunk_ = chunk;
}

void BatchLoader::seek(int64_t epoch, int64_t batch_index) {
  if (epoch < 0) {
    throw std::out_of_range("epoch must be non-negative, got " + std::to_string(epoch));
  }
  if (batch_index < 0 || batch_index > num_batches()) {
    throw std::out_of_range("batch index " + std::to_string(batch_index) + " is outside 0.." +
                            std::to_string(num_batches()) + " for " + std::to_string(num_examples()) +
                            " examples in batches of " + std::to_string(batch_size_));
  }
  if (epoch != epoch_) {
    order_ = epoch_order(num_examples(), shuffle_, seed_, epoch);
  }
  epoch_ = epoch;
  batch_offset_ = batch_index;
}

bool BatchLoader::next(Batch& out) {
  if (batch_offset_ >= num_batches()) return false;
  const int64_t global_count = std::min(batch_size_, num_examples() - batch_offset_ * batch_size_);
  const RowRange shard = shard_rows(global_count, shard_count_, shard_index_, shard_chunk_);
  const int64_t begin = batch_offset_ * batch_size_ + shard.begin;
  const int64_t count = shard.size();

  Tensor images = Tensor::empty({count, shape_.channels, shape_.height, shape_.width}, DType::f32);
  Tensor labels = Tensor::empty({count}, DType::i64);
  const Draw draw{seed_, epoch_, augment_};
  float* image_out = images.data<float>();
  int64_t* label_out = labels.data<int64_t>();
  const int parts = static_cast<int>(std::min<int64_t>(threads_, count));
  std::vector<std::thread> helpers;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(std::max(parts, 1)));
  for (int part = 0; part < std::max(parts, 1); ++part) {
    const RowRange rows = shard_rows(count, std::max(parts, 1), part);
    const auto fill_part = [&, rows, part] {
      try {
        data_->fill(std::span<const int64_t>(order_.data() + begin + rows.begin, static_cast<size_t>(rows.size())), draw,
                    image_out + rows.begin * shape_.numel(), label_out + rows.begin);
      } catch (...) {
        errors[static_cast<size_t>(part)] = std::current_exception();
      }
    };
    if (part + 1 < parts) helpers.emplace_back(fill_part);
    else fill_part();
  }
  for (std::thread& t : helpers) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  out.images = std::move(images);
  out.labels = std::move(labels);
  out.global_size = global_count;
  ++batch_offset_;
  return true;
}

}  // namespace dpt::data
