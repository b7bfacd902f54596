// The MPI communicator, run by mpirun with 2 and 3 ranks on loopback (see CMakeLists.txt):
// ring and naive allreduce equal the in-process backends' sums bit for bit (the same
// additions in the same order) for awkward sizes, and the ring moves exactly
// 2 (N-1) chunks per rank, measured by what MPI delivered; every ReduceOp on f32 and i64
// equals its direct serial expectation on every rank; broadcast (f32, i64) from a non-zero root;
// barrier; and a collective a peer never joins ends in CollectiveTimeout naming that peer,
// within the timeout, instead of a hang.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "../mpi/mpi_test_main.h"
#include "dpt/core/random.h"
#include "dpt/parallel/communicator.h"
#include "dpt/parallel/mpi_communicator.h"
#include "../support/reduce_expectations.h"

using dpt::DType;
using dpt::parallel::Communicator;
using dpt::parallel::ReduceOp;
using dpt::testing_support::g_mpi;

namespace {

std::vector<float> random_floats(size_t count, uint64_t seed) {
  dpt::Rng rng(seed);
  std::vector<float> values(count);
  for (float& v : values) v = static_cast<float>(2.0 * dpt::uniform01(rng) - 1.0);
  return values;
}

// What the in-process backend computes when rank r holds inputs[r]: N threads, one per rank.
std::vector<float> in_process_sum(const std::string& algorithm, const std::vector<std::vector<float>>& inputs) {
  const int n = static_cast<int>(inputs.size());
  auto comm = dpt::parallel::make_in_process_communicator(algorithm, n);
  std::vector<std::vector<float>> buffers = inputs;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { comm->allreduce_sum(r, buffers[r].data(), buffers[r].size()); });
  }
  for (std::thread& t : threads) t.join();
  return buffers[0];
}

size_t ring_chunk(size_t count, int n, int c) { return count / n + (static_cast<size_t>(c) < count % n ? 1 : 0); }

class MpiAllreduce : public ::testing::TestWithParam<std::string> {};

TEST_P(MpiAllreduce, EqualsTheInProcessBackendBitForBitAndMovesTheAlgorithmsBytes) {
  const int n = g_mpi->size(), rank = g_mpi->rank();
  auto comm = g_mpi->communicator(GetParam(), 60);
  ASSERT_EQ(comm->size(), n);
  for (const size_t count : {size_t{1}, size_t{2}, size_t{7}, size_t{100}, size_t{4097}, size_t{1000003}}) {
    SCOPED_TRACE("count " + std::to_string(count));
    std::vector<std::vector<float>> inputs(n);
    for (int r = 0; r < n; ++r) inputs[r] = random_floats(count, 1000 * count + r);
    std::vector<float> mine = inputs[rank];
    const size_t before = comm->bytes_received(rank);
    comm->allreduce_sum(rank, mine.data(), count);
    const size_t received = comm->bytes_received(rank) - before;

    const std::vector<float> expected = in_process_sum(GetParam(), inputs);
    EXPECT_EQ(std::memcmp(mine.data(), expected.data(), count * sizeof(float)), 0);
    size_t expected_elements = 0;
    if (GetParam() == "ring") {
      expected_elements = (count - ring_chunk(count, n, rank)) + (count - ring_chunk(count, n, (rank + 1) % n));
    } else {
      expected_elements = rank == 0 ? (n - 1) * count : count;
    }
    EXPECT_EQ(received, expected_elements * sizeof(float)) << "rank " << rank;
    if (GetParam() == "ring" && count == 1000003) {
      const double ideal = 2.0 * (n - 1) / n * count * sizeof(float);
      EXPECT_NEAR(static_cast<double>(received), ideal, 2.0 * (n - 1) * sizeof(float));
    }
  }
}

// What the in-process backend computes with `op` when rank r holds inputs[r].
template <class T>
std::vector<T> in_process_reduce(const std::string& algorithm, const std::vector<std::vector<T>>& inputs, ReduceOp op) {
  const int n = static_cast<int>(inputs.size());
  auto comm = dpt::parallel::make_in_process_communicator(algorithm, n);
  std::vector<std::vector<T>> buffers = inputs;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { comm->allreduce(r, buffers[r].data(), buffers[r].size(), op); });
  for (std::thread& t : threads) t.join();
  return buffers[0];
}

// One op on one element type: this rank's result against the direct expectation and the
// in-process backend's bits, and the bytes the algorithm moves for elements of this size.
template <class T>
void expect_mpi_allreduce(Communicator& comm, const std::string& algorithm, ReduceOp op, size_t count) {
  const int n = g_mpi->size(), rank = g_mpi->rank();
  const DType type = std::is_same_v<T, float> ? DType::f32 : DType::i64;
  SCOPED_TRACE(dpt::testing_support::op_type_name(op, type) + ", count " + std::to_string(count) + ", rank " +
               std::to_string(rank));
  std::vector<std::vector<T>> inputs(n);
  for (int r = 0; r < n; ++r) inputs[r] = dpt::testing_support::reduce_test_input<T>(count, r, count);
  std::vector<T> mine = inputs[rank];
  const size_t before = comm.bytes_received(rank);
  comm.allreduce(rank, mine.data(), count, op);
  const size_t received = comm.bytes_received(rank) - before;
  EXPECT_EQ(mine, dpt::testing_support::reduce_serially(inputs, op));
  const std::vector<T> in_process = in_process_reduce(algorithm, inputs, op);
  EXPECT_EQ(std::memcmp(mine.data(), in_process.data(), count * sizeof(T)), 0);
  const size_t elements = algorithm == "ring"
                              ? (count - ring_chunk(count, n, rank)) + (count - ring_chunk(count, n, (rank + 1) % n))
                              : (rank == 0 ? (n - 1) * count : count);
  EXPECT_EQ(received, elements * sizeof(T));
}

// Every rank checks its own result (a failure on any rank fails the program).
TEST_P(MpiAllreduce, EveryReduceOpOnF32AndI64EqualsTheSerialReductionAndTheInProcessBits) {
  auto comm = g_mpi->communicator(GetParam(), 60);
  for (const ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
    for (const size_t count : {size_t{1}, size_t{2}, size_t{7}, size_t{100}, size_t{4097}}) {
      expect_mpi_allreduce<float>(*comm, GetParam(), op, count);
      expect_mpi_allreduce<int64_t>(*comm, GetParam(), op, count);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, MpiAllreduce, ::testing::Values("ring", "naive"));

TEST(MpiCollectives, BroadcastFromTheLastRankAndBarrier) {
  const int n = g_mpi->size(), rank = g_mpi->rank();
  auto comm = g_mpi->communicator("ring", 60);
  std::vector<float> data = random_floats(1001, 50 + rank);
  const std::vector<float> root_data = random_floats(1001, 50 + n - 1);
  comm->broadcast(rank, data.data(), data.size(), n - 1);
  EXPECT_EQ(data, root_data);
  std::vector<int64_t> integers = dpt::testing_support::reduce_test_input<int64_t>(17, rank, 3);
  const std::vector<int64_t> root_integers = dpt::testing_support::reduce_test_input<int64_t>(17, n - 1, 3);
  comm->broadcast(rank, integers.data(), integers.size(), n - 1);
  EXPECT_EQ(integers, root_integers);
  comm->barrier(rank);
  EXPECT_THROW(comm->allreduce_sum(rank + 1, data.data(), 1), std::invalid_argument);
}

TEST(MpiCollectives, AbortReleasesTheCallerWithCollectiveAborted) {
  auto comm = g_mpi->communicator("ring", 60);
  comm->abort("a device of this process failed");
  float x = 1;
  try {
    comm->allreduce_sum(g_mpi->rank(), &x, 1);
    ADD_FAILURE() << "no exception";
  } catch (const dpt::parallel::CollectiveAborted& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("a device of this process failed"));
  }
}

// The timed-out communicator is not used again: it holds a message nobody will receive.
TEST(MpiCollectives, ACollectiveAPeerNeverJoinsTimesOutNamingThePeer) {
  const int n = g_mpi->size(), rank = g_mpi->rank();
  auto comm = g_mpi->communicator("ring", 1.5);
  auto sync = g_mpi->communicator("ring", 60);
  if (rank == 0) {
    float x = 1;
    const auto start = std::chrono::steady_clock::now();
    try {
      comm->allreduce_sum(rank, &x, 1);
      ADD_FAILURE() << "no timeout";
    } catch (const dpt::parallel::CollectiveTimeout& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("on rank 0 of " + std::to_string(n) + " timed out after 1.5 s"));
      EXPECT_THAT(e.what(), ::testing::HasSubstr("waiting for rank " + std::to_string(n - 1)));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(seconds, 1.5);
    EXPECT_LT(seconds, 5.0);
  }
  sync->barrier(rank);  // the others wait here for rank 0's verdict
}

}  // namespace

int main(int argc, char** argv) { return dpt::testing_support::run_mpi_tests(argc, argv); }
