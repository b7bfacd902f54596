// The MPI communicator, run by mpirun with 2 and 3 ranks on loopback (see CMakeLists.txt):
// ring and naive allreduce equal the in-process backends' sums bit for bit (the same
// additions in the same order) for awkward sizes, and the ring moves exactly
// 2 (N-1) chunks per rank, measured by what MPI delivered; every ReduceOp on f32 and i64
// equals its direct serial expectation on every rank; broadcast (f32, i64) from a non-zero root;
// barrier; and a collective a peer never joins ends in CollectiveTimeout naming that peer,
// within the timeout, instead of a hang. With two devices (threads) per process, the
// two-level communicator sums, broadcasts and exchanges over every device of every process
// while one buffer per process crosses between them; and bf16 compression sums the rounded
// values in rank order on every rank with half the float ring's bytes.
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
#include "dpt/parallel/compression.h"
#include "dpt/parallel/hierarchical_communicator.h"
#include "dpt/parallel/mpi_communicator.h"
#include "dpt/parallel/ring_schedule.h"
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


// ---------------------------------------------------------------------------------------
// Two devices per process: HierarchicalCommunicator over two threads of each process.

constexpr int kDevices = 2;

template <typename PerDevice>
void on_each_device(const PerDevice& per_device) {
  std::vector<std::thread> threads;
  for (int d = 0; d < kDevices; ++d) threads.emplace_back(per_device, d);
  for (std::thread& t : threads) t.join();
}

std::shared_ptr<dpt::parallel::HierarchicalCommunicator> two_devices_per_process(std::shared_ptr<Communicator> between) {
  return std::make_shared<dpt::parallel::HierarchicalCommunicator>(
      dpt::parallel::make_in_process_communicator("ring", kDevices), std::move(between), g_mpi->rank());
}

// Small integers: every order of summing them gives the same float.
float integer_input(int global_rank, size_t i) { return static_cast<float>(static_cast<int>((global_rank * 7 + i) % 13) - 6); }

size_t ring_elements_received(size_t count, int n, int rank) {
  return (count - ring_chunk(count, n, rank)) + (count - ring_chunk(count, n, (rank + 1) % n));
}

TEST(HierarchicalCollectives, AllreduceSumsEveryDeviceOfEveryProcessAndSendsOneBufferBetweenThem) {
  const int n = g_mpi->size(), rank = g_mpi->rank();
  auto comm = two_devices_per_process(g_mpi->communicator("ring", 60));
  ASSERT_EQ(comm->size(), n * kDevices);
  for (const size_t count : {size_t{1}, size_t{7}, size_t{4097}, size_t{100003}}) {
    SCOPED_TRACE("count " + std::to_string(count));
    const size_t network_before = comm->bytes_between_processes(rank * kDevices);
    std::vector<std::vector<float>> data(kDevices);
    on_each_device([&](int d) {
      const int global = rank * kDevices + d;
      for (size_t i = 0; i < count; ++i) data[d].push_back(integer_input(global, i));
      comm->allreduce_sum(global, data[d].data(), count);
    });
    for (int d = 0; d < kDevices; ++d) {
      for (size_t i = 0; i < count; ++i) {
        float expected = 0;
        for (int g = 0; g < n * kDevices; ++g) expected += integer_input(g, i);
        ASSERT_EQ(data[d][i], expected) << "device " << d << " of rank " << rank << ", element " << i;
      }
    }
    // Between the processes moves what one device per process would: the P-rank ring's
    // bytes, not those of a ring over all P x 2 devices.
    EXPECT_EQ(comm->bytes_between_processes(rank * kDevices) - network_before,
              ring_elements_received(count, n, rank) * sizeof(float));
    EXPECT_EQ(comm->bytes_between_processes(rank * kDevices + 1), 0u);
  }
  // Integers keep their own type and op through both levels.
  std::vector<std::vector<int64_t>> largest(kDevices);
  on_each_device([&](int d) {
    const int global = rank * kDevices + d;
    largest[d] = {global, -global};
    comm->allreduce(global, largest[d].data(), 2, ReduceOp::max);
  });
  for (int d = 0; d < kDevices; ++d) EXPECT_EQ(largest[d], (std::vector<int64_t>{n * kDevices - 1, 0}));
}

TEST(HierarchicalCollectives, BroadcastFromEveryDeviceAndAlltoallReachEveryDevice) {
  const int n = g_mpi->size(), rank = g_mpi->rank();
  const int ranks = n * kDevices;
  auto comm = two_devices_per_process(g_mpi->communicator("ring", 60));
  for (int root = 0; root < ranks; ++root) {
    std::vector<std::vector<float>> data(kDevices);
    on_each_device([&](int d) {
      const int global = rank * kDevices + d;
      data[d] = random_floats(33, 700 + global);
      comm->broadcast(global, data[d].data(), data[d].size(), root);
    });
    for (int d = 0; d < kDevices; ++d) EXPECT_EQ(data[d], random_floats(33, 700 + root)) << "root " << root;
  }
  // Global rank s sends rank t (s + t) % 3 values 1000 s + 10 t + k: empty, short and
  // longer blocks, within a process and between processes.
  const auto length = [](int from, int to) { return static_cast<size_t>((from + to) % 3); };
  std::vector<std::vector<std::vector<float>>> received(kDevices);
  on_each_device([&](int d) {
    const int global = rank * kDevices + d;
    std::vector<std::vector<float>> out(ranks);
    received[d].assign(ranks, {});
    std::vector<Communicator::Block> send(ranks), receive(ranks);
    for (int t = 0; t < ranks; ++t) {
      for (size_t k = 0; k < length(global, t); ++k) out[t].push_back(static_cast<float>(1000 * global + 10 * t + k));
      received[d][t].assign(length(t, global), -1.0f);
      send[t] = {out[t].data(), out[t].size()};
      receive[t] = {received[d][t].data(), received[d][t].size()};
    }
    comm->alltoall(global, send, receive, DType::f32);
  });
  for (int d = 0; d < kDevices; ++d) {
    const int global = rank * kDevices + d;
    for (int s = 0; s < ranks; ++s) {
      for (size_t k = 0; k < length(s, global); ++k) {
        EXPECT_EQ(received[d][s][k], static_cast<float>(1000 * s + 10 * global + k)) << "from " << s << " to " << global;
      }
    }
  }
  on_each_device([&](int d) { comm->barrier(rank * kDevices + d); });
}

// ---------------------------------------------------------------------------------------
// bf16 compression.

// What every rank must hold: each rank's values rounded to bf16, summed in float in rank
// order, the sum rounded again.
std::vector<float> bf16_sum_in_rank_order(const std::vector<std::vector<float>>& inputs) {
  std::vector<float> sum(inputs[0].size());
  for (size_t i = 0; i < sum.size(); ++i) {
    float total = 0;
    for (const std::vector<float>& rank_values : inputs) total += dpt::parallel::from_bf16(dpt::parallel::to_bf16(rank_values[i]));
    sum[i] = dpt::parallel::from_bf16(dpt::parallel::to_bf16(total));
  }
  return sum;
}

TEST(CompressedAllreduce, Bf16SumsTheRoundedValuesInRankOrderWithHalfTheRingsBytes) {
  const int n = g_mpi->size(), rank = g_mpi->rank();
  auto comm = g_mpi->communicator("ring", 60);
  for (const size_t count : {size_t{1}, size_t{5}, size_t{4097}, size_t{1000003}}) {
    SCOPED_TRACE("count " + std::to_string(count));
    std::vector<std::vector<float>> inputs(n);
    for (int r = 0; r < n; ++r) inputs[r] = random_floats(count, 31 * count + r);
    std::vector<float> mine = inputs[rank];
    const size_t before = comm->bytes_received(rank);
    comm->allreduce_compressed(rank, mine.data(), count, dpt::parallel::Compression::bf16);
    const size_t received = comm->bytes_received(rank) - before;
    const std::vector<float> expected = bf16_sum_in_rank_order(inputs);
    EXPECT_EQ(std::memcmp(mine.data(), expected.data(), count * sizeof(float)), 0);
    // Every other rank's slice `rank`, then every slice but this rank's, two bytes each.
    const size_t slice = dpt::parallel::ring::chunk(rank, count, n).size();
    EXPECT_EQ(received, ((n - 1) * slice + (count - slice)) * 2);
    if (count == 1000003) {
      const double float_ring = static_cast<double>(ring_elements_received(count, n, rank) * sizeof(float));
      EXPECT_NEAR(static_cast<double>(received) / float_ring, 0.5, 0.001);
    }
  }
}

TEST(CompressedAllreduce, TwoLevelsSumInFloatWithinAProcessAndInBf16BetweenProcesses) {
  const int n = g_mpi->size(), rank = g_mpi->rank();
  auto comm = two_devices_per_process(g_mpi->communicator("ring", 60));
  const size_t count = 4099;
  std::vector<std::vector<float>> process_sums(n, std::vector<float>(count));
  for (int p = 0; p < n; ++p) {
    const std::vector<float> a = random_floats(count, 90 + p * kDevices), b = random_floats(count, 91 + p * kDevices);
    for (size_t i = 0; i < count; ++i) process_sums[p][i] = a[i] + b[i];  // two terms: the same in either order
  }
  const std::vector<float> expected = bf16_sum_in_rank_order(process_sums);
  std::vector<std::vector<float>> data(kDevices);
  on_each_device([&](int d) {
    const int global = rank * kDevices + d;
    data[d] = random_floats(count, 90 + global);
    comm->allreduce_compressed(global, data[d].data(), count, dpt::parallel::Compression::bf16);
  });
  for (int d = 0; d < kDevices; ++d) EXPECT_EQ(std::memcmp(data[d].data(), expected.data(), count * sizeof(float)), 0) << "device " << d;
}

}  // namespace

int main(int argc, char** argv) { return dpt::testing_support::run_mpi_tests(argc, argv); }
