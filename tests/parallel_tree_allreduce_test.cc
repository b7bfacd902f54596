// --deterministic's allreduce (parallel/tree_allreduce.h) over the in-process backends, one
// thread per rank: every rank ends with the bits of one rank combining every chunk, for
// any rank count and buffers shorter than the rank count; a rank receives the ring's
// volume when each rank holds one tree node; and the all-to-all it is built on moves
// each block to its rank and refuses blocks whose counts disagree.
#include "dpt/parallel/tree_allreduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dpt/data/loader.h"
#include "support/order_sensitive_values.h"
#include "dpt/parallel/communicator.h"

namespace {
using dpt::DType;
using dpt::parallel::ChunkTree;
using dpt::parallel::Communicator;
using dpt::parallel::TreeNode;
using Block = Communicator::Block;

using dpt::testing::order_sensitive_values;

// Rank r's nodes when it sums its chunks (data::shard_rows), as the training loop has them.
std::vector<TreeNode> nodes_of_rank(const std::vector<std::vector<float>>& values, int ranks, int r) {
  const auto chunks = static_cast<int64_t>(values.size());
  const dpt::data::RowRange mine = dpt::data::shard_rows(chunks, ranks, r);
  ChunkTree tree(mine.begin, mine.end, chunks);
  for (int64_t c = mine.begin; c < mine.end; ++c) tree.add_chunk(c, values[static_cast<size_t>(c)]);
  return tree.nodes();
}

// Runs body(rank) on one thread per rank.
void on_every_rank(int ranks, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back(body, r);
  for (std::thread& t : threads) t.join();
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(TreeAllreduce, EveryRankEndsWithTheBitsOfOneRankForAnyRankCount) {
  for (const std::string algorithm : {"ring", "naive"}) {
    for (int64_t chunks = 1; chunks <= 9; ++chunks) {
      for (const size_t width : {size_t{1}, size_t{3}, size_t{37}}) {  // fewer values than ranks, and more
        const auto values = order_sensitive_values(chunks, width, static_cast<unsigned>(chunks * 100 + width));
        const std::vector<float> one = dpt::parallel::combine_nodes(nodes_of_rank(values, 1, 0), chunks);
        for (int ranks = 2; ranks <= 5; ++ranks) {  // more ranks than chunks: idle ranks hold no node
          auto comm = dpt::parallel::make_in_process_communicator(algorithm, ranks);
          std::vector<std::vector<float>> results(ranks);
          on_every_rank(ranks, [&](int r) {
            results[r] = dpt::parallel::tree_allreduce(*comm, r, dpt::Device::cpu(), nodes_of_rank(values, ranks, r), chunks, width);
          });
          for (int r = 0; r < ranks; ++r) {
            EXPECT_TRUE(same_bits(results[r], one))
                << algorithm << ": " << chunks << " chunks of " << width << " values over " << ranks << " ranks, rank "
                << r;
          }
        }
      }
    }
  }
}

// 8 chunks over 4 ranks: each rank holds one node (two chunks), so each receives the other
// ranks' share of its slice, then every slice but its own: 2 (N-1)/N of the buffer.
TEST(TreeAllreduce, EachRankReceivesTheRingsVolumeWhenItHoldsOneNode) {
  constexpr int kRanks = 4;
  constexpr int64_t kChunks = 8;
  constexpr size_t kWidth = 1001;  // not a multiple of 4: slices of 251 and 250
  const auto values = order_sensitive_values(kChunks, kWidth, 7);
  auto comm = dpt::parallel::make_in_process_communicator("ring", kRanks);
  on_every_rank(kRanks, [&](int r) {
    const std::vector<TreeNode> mine = nodes_of_rank(values, kRanks, r);
    ASSERT_EQ(mine.size(), 1u) << "rank " << r;
    dpt::parallel::tree_allreduce(*comm, r, dpt::Device::cpu(), mine, kChunks, kWidth);
  });
  for (int r = 0; r < kRanks; ++r) {
    const size_t own = r == 0 ? 251 : 250;
    const size_t elements = (kRanks - 1) * own + (kWidth - own);
    EXPECT_EQ(comm->bytes_received(r), elements * sizeof(float)) << "rank " << r;
    EXPECT_NEAR(static_cast<double>(comm->bytes_received(r)), 2.0 * (kRanks - 1) / kRanks * kWidth * sizeof(float),
                kRanks * sizeof(float));
  }
}

TEST(Alltoall, EachBlockReachesItsRankIncludingEmptyOnesAndTheBlockToItself) {
  constexpr int kRanks = 3;
  for (const std::string algorithm : {"ring", "naive"}) {
    auto comm = dpt::parallel::make_in_process_communicator(algorithm, kRanks);
    // Rank s sends rank d (s + d) % 3 int64 values, each 100 s + d.
    std::vector<std::vector<std::vector<int64_t>>> got(kRanks, std::vector<std::vector<int64_t>>(kRanks));
    on_every_rank(kRanks, [&](int r) {
      std::vector<std::vector<int64_t>> out(kRanks);
      std::vector<Block> send(kRanks), receive(kRanks);
      for (int d = 0; d < kRanks; ++d) {
        out[d].assign(static_cast<size_t>((r + d) % kRanks), 100 * r + d);
        send[d] = {out[d].data(), out[d].size()};
        got[r][d].assign(static_cast<size_t>((d + r) % kRanks), -1);
        receive[d] = {got[r][d].data(), got[r][d].size()};
      }
      comm->alltoall(r, send, receive, DType::i64);
    });
    for (int r = 0; r < kRanks; ++r) {
      for (int s = 0; s < kRanks; ++s) {
        EXPECT_EQ(got[r][s], std::vector<int64_t>(static_cast<size_t>((s + r) % kRanks), 100 * s + r))
            << algorithm << ": rank " << r << " from rank " << s;
      }
    }
  }
}

TEST(Alltoall, CountsThatDisagreeStopEveryRankWithTheMessage) {
  constexpr int kRanks = 2;
  auto comm = dpt::parallel::make_in_process_communicator("ring", kRanks);
  std::vector<std::string> errors(kRanks);
  on_every_rank(kRanks, [&](int r) {
    std::vector<float> out(4), in(4), self_out(1), self_in(1);
    // Rank 0 sends rank 1 four values, which expects three; rank 1 sends rank 0 two, as expected.
    const size_t to_peer = r == 0 ? 4 : 2, from_peer = r == 0 ? 2 : 3;
    std::vector<Block> send(kRanks), receive(kRanks);
    send[r] = {self_out.data(), 1};
    receive[r] = {self_in.data(), 1};
    send[1 - r] = {out.data(), to_peer};
    receive[1 - r] = {in.data(), from_peer};
    try {
      comm->alltoall(r, send, receive, DType::f32);
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  });
  EXPECT_EQ(errors[1], "alltoall: rank 0 sends 4 elements to rank 1, which expects 3");
  EXPECT_NE(errors[0].find("alltoall: rank 0 sends 4 elements to rank 1, which expects 3"), std::string::npos)
      << errors[0];
}

TEST(Alltoall, RefusesAWrongNumberOfBlocks) {
  auto comm = dpt::parallel::make_in_process_communicator("ring", 1);
  float x = 1;
  const std::vector<Block> one{{&x, 1}}, two{{&x, 1}, {&x, 1}};
  try {
    comm->alltoall(0, two, one, DType::f32);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "alltoall needs one send and one receive block per rank (1), got 2 and 1");
  }
}

TEST(Alltoall, RefusesASelfBlockOfAnotherSize) {
  auto comm = dpt::parallel::make_in_process_communicator("ring", 1);
  float x[2] = {1, 2}, y[2] = {0, 0};
  const std::vector<Block> send{{x, 2}}, receive{{y, 1}};
  try {
    comm->alltoall(0, send, receive, DType::f32);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "alltoall: rank 0 sends itself 2 elements into a block of 1");
  }
  EXPECT_EQ(y[0], 0) << "nothing is copied once the counts disagree";
}

}  // namespace
