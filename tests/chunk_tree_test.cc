// The fixed summation tree of --deterministic (parallel/chunk_tree.h): whatever the split of
// the chunks over ranks, the combined sum has the bits of one rank summing them all.
#include "dpt/parallel/chunk_tree.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "dpt/data/loader.h"
#include "support/order_sensitive_values.h"

namespace {
using dpt::parallel::ChunkTree;
using dpt::parallel::TreeNode;

using dpt::testing::order_sensitive_values;

// The sum as `ranks` ranks compute it: each its chunks (data::shard_rows), then combined.
std::vector<float> sum_over(const std::vector<std::vector<float>>& values, int64_t ranks) {
  const auto chunks = static_cast<int64_t>(values.size());
  std::vector<TreeNode> all;
  for (int64_t r = 0; r < ranks; ++r) {
    const dpt::data::RowRange mine = dpt::data::shard_rows(chunks, ranks, r);
    ChunkTree tree(mine.begin, mine.end, chunks);
    for (int64_t c = mine.begin; c < mine.end; ++c) tree.add_chunk(c, values[static_cast<size_t>(c)]);
    const std::vector<TreeNode> expected = dpt::parallel::tree_nodes_of(mine.begin, mine.end, chunks);
    EXPECT_EQ(tree.nodes().size(), expected.size()) << "rank " << r;
    for (size_t i = 0; i < expected.size() && i < tree.nodes().size(); ++i) {
      EXPECT_EQ(tree.nodes()[i].lo, expected[i].lo);
      EXPECT_EQ(tree.nodes()[i].level, expected[i].level);
    }
    for (TreeNode& node : tree.nodes()) all.push_back(std::move(node));
  }
  return dpt::parallel::combine_nodes(std::move(all), chunks);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ChunkTree, AnySplitOverRanksGivesTheBitsOfOneRank) {
  for (int64_t chunks = 1; chunks <= 19; ++chunks) {
    const auto values = order_sensitive_values(chunks, 16, static_cast<unsigned>(chunks));
    const std::vector<float> one = sum_over(values, 1);
    for (int64_t ranks = 2; ranks <= chunks + 2; ++ranks) {  // more ranks than chunks: idle ranks
      EXPECT_TRUE(same_bits(sum_over(values, ranks), one)) << chunks << " chunks over " << ranks << " ranks";
    }
  }
}

TEST(ChunkTree, TheSumIsTheTreesNotARunningSum) {
  // Eight chunks: ((0+1)+(2+3))+((4+5)+(6+7)). A running sum, or the same tree with one
  // pair regrouped, gives other bits for these values: the order is what the test fixes.
  const auto values = order_sensitive_values(8, 64, 8);
  const std::vector<float> tree = sum_over(values, 1);
  std::vector<float> pairs = values[0];
  for (size_t i = 0; i < pairs.size(); ++i) {
    const float left = (values[0][i] + values[1][i]) + (values[2][i] + values[3][i]);
    const float right = (values[4][i] + values[5][i]) + (values[6][i] + values[7][i]);
    pairs[i] = left + right;
  }
  EXPECT_TRUE(same_bits(tree, pairs));
  std::vector<float> running = values[0];
  for (size_t c = 1; c < values.size(); ++c) {
    for (size_t i = 0; i < running.size(); ++i) running[i] += values[c][i];
  }
  EXPECT_FALSE(same_bits(tree, running)) << "the test values are too tame to tell orders apart";
}

TEST(ChunkTree, RefusesChunksOutOfOrderAndNodesThatDoNotPartition) {
  ChunkTree tree(2, 5, 8);
  EXPECT_THROW(tree.add_chunk(3, {1.0f}), std::logic_error);
  std::vector<TreeNode> gap;
  gap.push_back({0, 1, {1.0f}});
  gap.push_back({3, 0, {1.0f}});
  EXPECT_THROW(dpt::parallel::combine_nodes(gap, 4), std::logic_error);
  EXPECT_THROW(ChunkTree(3, 2, 8), std::invalid_argument);
}

}  // namespace
