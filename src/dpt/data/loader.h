// BatchLoader: cuts a Dataset into minibatches of float images and int64 labels, in an
// order that depends only on (seed, epoch), so a run resumed from a checkpoint sees
// exactly the batches the uninterrupted run would have seen. Each example's random
// transforms depend only on (seed, epoch, example index) (data/dataset.h: Draw), so
// neither a resume nor the device count changes what an example becomes.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "dpt/core/random.h"
#include "dpt/core/tensor.h"
#include "dpt/data/dataset.h"

namespace dpt::data {

struct Batch {
  Tensor images;  // f32 [B, C, H, W]: the data set's shape()
  Tensor labels;  // i64 [B]
  // Examples in the global batch this one is a shard of (== B unless the loader is
  // sharded): what the SGD step divides by.
  int64_t global_size = 0;
  // Where this batch sits in the run, the same on any device or process count: the row of
  // its first example in the global batch (0 unless sharded), and the global batch's
  // number, epoch * batches per epoch + batch in the epoch (-1: not from a loader).
  // Dropout's masks are drawn from them (nn::StepContext).
  int64_t first_row = 0;
  int64_t number = -1;
};

// Rows [begin, end) of shard `index` when `rows` rows are cut into `count` shards as evenly
// as possible, the first rows % count shards one row longer (256 over 3: 86/85/85). The one
// rule both parallel::split_batch (devices of one process) and a sharded BatchLoader (one
// process per device) follow, so N processes see exactly the shards N devices would.
// With `chunk` > 1 the rows are cut into chunks of `chunk` (the last one shorter) and the
// chunks shared out the same way, so every shard holds whole chunks (--deterministic).
struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
RowRange shard_rows(int64_t rows, int64_t count, int64_t index, int64_t chunk = 1);
// Chunks of `chunk` rows in `rows` (the last one may be shorter).
int64_t chunks_in(int64_t rows, int64_t chunk);

// The order in which epoch `epoch` visits examples 0..n-1: the identity without shuffling,
// otherwise a hand-written Fisher-Yates shuffle driven by std::mt19937_64 (whose output
// the standard fixes, unlike std::shuffle and the distributions), so the order is the
// same with every standard library.
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

using dpt::mix64;  // core/random.h: the one seed mixer
// Uniform in [0, n) from the generator's raw output, unbiased by rejection (the standard
// fixes mt19937_64's output but not the distributions' algorithms).
uint64_t uniform_below(std::mt19937_64& rng, uint64_t n);

class BatchLoader {
 public:
  // `data` is held by reference and must outlive the loader (datasets are large and
  // shared by the train and test loops; copying them per loader would waste memory).
  // Throws std::invalid_argument unless batch_size > 0. Starts positioned at epoch 0.
  // Training loaders shuffle and `augment` (random transforms draw); evaluation's do neither.
  BatchLoader(const Dataset& data, int64_t batch_size, bool shuffle, uint64_t seed, bool augment = false);
  BatchLoader(Dataset&&, int64_t, bool, uint64_t, bool = false) = delete;  // would dangle
  // Movable (a moved loader starts its prefetching afresh at its next next()), not copyable.
  BatchLoader(BatchLoader&&) noexcept = default;
  BatchLoader& operator=(BatchLoader&&) noexcept = default;
  ~BatchLoader();

  int64_t num_examples() const { return size_; }
  // The last batch is kept even if partial: 60000 examples at 256 give 235 batches.
  int64_t num_batches() const { return (num_examples() + batch_size_ - 1) / batch_size_; }
  int64_t batch_size() const { return batch_size_; }
  int64_t epoch() const { return epoch_; }
  // Index within the epoch of the batch next() returns next; with epoch() this is the
  // position a checkpoint stores and seek() restores.
  int64_t batch_offset() const { return batch_offset_; }

  // Distributed sampling: from now on next() yields only shard `index` of `count` of every
  // global batch (shard_rows), while the global order stays that of (seed, epoch), so every
  // process of a job that uses the same seed reads its own, disjoint part of the same batch.
  // A shard can be empty when the global batch has fewer than `count` examples.
  void set_shard(int64_t index, int64_t count, int64_t chunk = 1);
  int64_t shard_index() const { return shard_index_; }
  int64_t shard_count() const { return shard_count_; }

  // Fills each batch on `threads` threads at once (each a contiguous part of the batch):
  // what decoding an image folder per batch needs. The batch is the same for any count.
  // Call before the first next().
  void set_threads(int threads) { threads_ = threads < 1 ? 1 : threads; }

  // Prepares up to `depth` batches ahead of next(), on a thread of its own (trace lane
  // "data"), in the order next() will ask for them, so decoding and augmenting overlap the
  // step; 0 (the default): next() fills its batch itself. The batches are the same either
  // way. Call before the first next(); set_shard and set_threads must come first.
  void set_prefetch(int depth);

  void start_epoch(int64_t epoch) { seek(epoch, 0); }
  // Positions the loader before batch `batch_index` (0..num_batches()) of `epoch` (>= 0);
  // throws std::out_of_range otherwise.
  void seek(int64_t epoch, int64_t batch_index);
  // Fills `out` with fresh tensors (earlier batches stay valid) and advances; returns
  // false, leaving `out` untouched, once the epoch's batches are used up. Sharded, `out`
  // holds this shard's rows only (possibly none) and out.global_size the whole batch's.
  bool next(Batch& out);

 private:
  struct Prefetcher;
  // Owns the prefetch thread, which reads the loader it was started by: a move leaves it
  // behind with the moved-from loader (stopped when that one goes) and starts empty.
  struct PrefetchSlot {
    std::unique_ptr<Prefetcher> running;
    PrefetchSlot();
    PrefetchSlot(PrefetchSlot&&) noexcept;
    PrefetchSlot& operator=(PrefetchSlot&&) noexcept;
    ~PrefetchSlot();
  };
  // Batch `offset` of `epoch`, whose visiting order is `order`: a pure function of them.
  Batch make(int64_t epoch, int64_t offset, const std::vector<int64_t>& order) const;

  const Dataset* data_;
  ImageShape shape_;
  int64_t size_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  bool augment_;
  int64_t epoch_ = 0;
  int64_t batch_offset_ = 0;
  int64_t shard_index_ = 0;
  int64_t shard_count_ = 1;
  int64_t shard_chunk_ = 1;
  int threads_ = 1;
  int prefetch_depth_ = 0;
  // Shared with the prefetch thread, which may still read the previous epoch's order.
  std::shared_ptr<const std::vector<int64_t>> order_;
  PrefetchSlot prefetcher_;  // started by the first next() with prefetch on
};

}  // namespace dpt::data
