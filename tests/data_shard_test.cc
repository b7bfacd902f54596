// The distributed sampler (data::BatchLoader::set_shard, data::shard_rows): N sharded
// loaders with the same seed read disjoint parts of the same global batches, exactly the
// shards parallel::split_batch gives N devices of one process, including an epoch's last,
// partial batch and batches smaller than N.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "dpt/data/idx_dataset.h"
#include "dpt/data/loader.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/replicate.h"
#include "test_support.h"

using dpt::data::Batch;
using dpt::data::BatchLoader;
using dpt::data::shard_rows;

namespace {

// `n` 2x2 images whose pixels and label identify the example.
dpt::data::InMemoryDataset numbered_dataset(int64_t n) {
  dpt::data::InMemoryDataset data;
  data.rows = data.cols = 2;
  for (int64_t i = 0; i < n; ++i) {
    for (int p = 0; p < 4; ++p) data.pixels.push_back(static_cast<uint8_t>((i * 4 + p) % 251));
    data.labels.push_back(i % 10);
  }
  return data;
}

std::vector<int64_t> labels_of(const dpt::Tensor& labels) {
  const int64_t* values = labels.data<int64_t>();
  return {values, values + labels.numel()};
}

TEST(ShardRows, CutsLikeSplitBatchFirstShardsOneLonger) {
  EXPECT_EQ(shard_rows(256, 3, 0).size(), 86);
  EXPECT_EQ(shard_rows(256, 3, 1).begin, 86);
  EXPECT_EQ(shard_rows(256, 3, 2).size(), 85);
  EXPECT_EQ(shard_rows(256, 3, 2).end, 256);
  EXPECT_EQ(shard_rows(2, 3, 2).size(), 0);  // fewer rows than shards: the last get none
  EXPECT_THROW(shard_rows(10, 3, 3), std::out_of_range);
  EXPECT_THROW(shard_rows(10, 0, 0), std::out_of_range);
}

class ShardedLoader : public ::testing::TestWithParam<int> {};

TEST_P(ShardedLoader, ShardsOfEveryBatchAreSplitBatchOfTheGlobalBatch) {
  const int n = GetParam();
  // 103 examples in batches of 20: the last batch holds 3, fewer than n = 4 shards.
  const dpt::data::InMemoryDataset data = numbered_dataset(103);
  BatchLoader global(data, 20, /*shuffle=*/true, 7);
  std::vector<BatchLoader> shards;
  for (int r = 0; r < n; ++r) {
    shards.emplace_back(data, 20, true, 7);
    shards.back().set_shard(r, n);
  }
  for (int64_t epoch : {0, 1}) {
    global.start_epoch(epoch);
    for (BatchLoader& loader : shards) loader.start_epoch(epoch);
    Batch whole;
    int batches = 0;
    while (global.next(whole)) {
      ++batches;
      const int64_t b = whole.labels.dim(0);
      EXPECT_EQ(whole.global_size, b);
      const int used = static_cast<int>(std::min<int64_t>(b, n));
      const auto expected = dpt::parallel::split_batch(whole.images, whole.labels, dpt::parallel::cpu_devices(used));
      for (int r = 0; r < n; ++r) {
        Batch part;
        ASSERT_TRUE(shards[r].next(part));
        EXPECT_EQ(part.global_size, b);
        if (r >= used) {
          EXPECT_EQ(part.labels.dim(0), 0) << "rank " << r << " of a batch of " << b;
          continue;
        }
        ASSERT_EQ(part.labels.dim(0), expected[r].y.dim(0));
        EXPECT_EQ(labels_of(part.labels), labels_of(expected[r].y)) << "epoch " << epoch << " rank " << r;
        EXPECT_EQ(part.images.to_vector(), expected[r].X.to_vector());
      }
    }
    EXPECT_EQ(batches, 6);
    for (BatchLoader& loader : shards) {
      Batch none;
      EXPECT_FALSE(loader.next(none));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, ShardedLoader, ::testing::Values(1, 2, 3, 4));

TEST(ShardedLoaderErrors, ShardMustExist) {
  const dpt::data::InMemoryDataset data = numbered_dataset(10);
  BatchLoader loader(data, 4, false, 0);
  EXPECT_THROW(loader.set_shard(2, 2), std::out_of_range);
  EXPECT_THROW(loader.set_shard(0, 0), std::out_of_range);
}

}  // namespace
