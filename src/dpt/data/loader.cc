#include "dpt/data/loader.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "dpt/core/trace.h"

namespace dpt::data {

// Uniform in [0, n) without std::uniform_int_distribution, whose algorithm differs between
// standard libraries. Rejecting the lowest 2^64 mod n draws leaves a range whose size is a
// multiple of n, so the remainder is unbiased.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t rejected = (0 - n) % n;
  uint64_t draw = rng();
  while (draw < rejected) draw = rng();
  return draw % n;
}

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

// One thread that fills the batches next() will want, `depth` at most ahead. seek()
// restarts it; a batch it was filling for the old position is dropped on arrival.
struct BatchLoader::Prefetcher {
  struct Ready {
    Batch batch;
    std::exception_ptr error;
  };

  Prefetcher(const BatchLoader& loader, int depth, int64_t epoch, int64_t offset,
             std::shared_ptr<const std::vector<int64_t>> order)
      : loader(loader), depth(depth), epoch(epoch), next_offset(offset), order(std::move(order)) {
    thread = std::thread([this] { produce(); });
  }
  ~Prefetcher() {
    {
      const std::lock_guard lock(mutex);
      stop = true;
    }
    changed.notify_all();
    thread.join();
  }

  void restart(int64_t new_epoch, int64_t offset, std::shared_ptr<const std::vector<int64_t>> new_order) {
    {
      const std::lock_guard lock(mutex);
      ++generation;
      ready.clear();
      epoch = new_epoch;
      next_offset = offset;
      order = std::move(new_order);
    }
    changed.notify_all();
  }

  // The next batch in order; waits for it (the host's `data` span).
  Batch take() {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return !ready.empty(); });
    Ready r = std::move(ready.front());
    ready.pop_front();
    lock.unlock();
    changed.notify_all();
    if (r.error) std::rethrow_exception(r.error);
    return std::move(r.batch);
  }

  void produce() {
    trace::name_this_thread(trace::data_lane, "data");
    std::unique_lock lock(mutex);
    for (;;) {
      changed.wait(lock, [&] {
        return stop || (static_cast<int>(ready.size()) < depth && next_offset < loader.num_batches());
      });
      if (stop) return;
      const uint64_t made_for = generation;
      const int64_t at_epoch = epoch, offset = next_offset++;
      const std::shared_ptr<const std::vector<int64_t>> at_order = order;
      lock.unlock();
      Ready r;
      try {
        const trace::Span span(trace::Phase::prefetch, offset);
        r.batch = loader.make(at_epoch, offset, *at_order);
      } catch (...) {
        r.error = std::current_exception();
      }
      lock.lock();
      if (made_for == generation) {
        ready.push_back(std::move(r));
        changed.notify_all();
      }
    }
  }

  const BatchLoader& loader;
  const int depth;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Ready> ready;
  uint64_t generation = 0;
  int64_t epoch;
  int64_t next_offset;
  std::shared_ptr<const std::vector<int64_t>> order;
  bool stop = false;
  std::thread thread;  // last: starts once the rest is set
};

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
  order_ = std::make_shared<const std::vector<int64_t>>(epoch_order(num_examples(), shuffle_, seed_, epoch_));
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
    order_ = std::make_shared<const std::vector<int64_t>>(epoch_order(num_examples(), shuffle_, seed_, epoch));
  }
  epoch_ = epoch;
  batch_offset_ = batch_index;
  if (prefetcher_.running) prefetcher_.running->restart(epoch_, batch_offset_, order_);
}

BatchLoader::PrefetchSlot::PrefetchSlot() = default;
BatchLoader::PrefetchSlot::PrefetchSlot(PrefetchSlot&&) noexcept {}
BatchLoader::PrefetchSlot& BatchLoader::PrefetchSlot::operator=(PrefetchSlot&&) noexcept {
  running.reset();
  return *this;
}
BatchLoader::PrefetchSlot::~PrefetchSlot() = default;

BatchLoader::~BatchLoader() = default;

void BatchLoader::set_prefetch(int depth) {
  if (depth < 0) throw std::invalid_argument("prefetch depth must be >= 0, got " + std::to_string(depth));
  prefetcher_.running.reset();
  prefetch_depth_ = depth;
}

Batch BatchLoader::make(int64_t epoch, int64_t offset, const std::vector<int64_t>& order) const {
  const int64_t global_count = std::min(batch_size_, num_examples() - offset * batch_size_);
  const RowRange shard = shard_rows(global_count, shard_count_, shard_index_, shard_chunk_);
  const int64_t begin = offset * batch_size_ + shard.begin;
  const int64_t count = shard.size();

  Batch out;
  out.images = Tensor::empty({count, shape_.channels, shape_.height, shape_.width}, DType::f32);
  out.labels = Tensor::empty({count}, DType::i64);
  out.global_size = global_count;
  out.first_row = shard.begin;
  out.number = epoch * num_batches() + offset;
  const Draw draw{seed_, epoch, augment_};
  float* image_out = out.images.data<float>();
  int64_t* label_out = out.labels.data<int64_t>();
  const int parts = static_cast<int>(std::max<int64_t>(std::min<int64_t>(threads_, count), 1));
  std::vector<std::thread> helpers;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(parts));
  for (int part = 0; part < parts; ++part) {
    const RowRange rows = shard_rows(count, parts, part);
    const auto fill_part = [&, rows, part] {
      try {
        data_->fill(std::span<const int64_t>(order.data() + begin + rows.begin, static_cast<size_t>(rows.size())), draw,
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
  return out;
}

bool BatchLoader::next(Batch& out) {
  if (batch_offset_ >= num_batches()) return false;
  if (prefetch_depth_ > 0 && !prefetcher_.running) {
    prefetcher_.running = std::make_unique<Prefetcher>(*this, prefetch_depth_, epoch_, batch_offset_, order_);
  }
  out = prefetcher_.running ? prefetcher_.running->take() : make(epoch_, batch_offset_, *order_);
  ++batch_offset_;
  return true;
}

}  // namespace dpt::data
