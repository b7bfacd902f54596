// The multi-device runtime (src/dpt/parallel, src/dpt/train/train_from_scratch): the
// in-process collectives (naive and ring) sum, broadcast and synchronise correctly for
// 1..8 ranks and awkward sizes, move the wire volume their algorithm promises, and release
// every rank when one fails; split_batch, replicate and parse_device_list do what their
// headers say; DevicePool keeps one persistent thread per device; and, the point of it
// all, one training step on N devices computes the same parameters as on one device, with
// all N replicas identical bit for bit.
//
// Runs under ThreadSanitizer too (scripts/test-tsan.sh): sizes shrink there, and every
// device gets one core, so no OpenMP team (uninstrumented libgomp) is ever started.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "dpt/data/idx_dataset.h"
#include "dpt/core/device.h"
#include "dpt/core/random.h"
#include "dpt/core/tensor.h"
#include "dpt/data/loader.h"
#include "dpt/nn/lenet.h"
#include "dpt/parallel/allreduce.h"
#include "dpt/parallel/communicator.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/device_pool.h"
#include "dpt/parallel/process_group.h"
#include "dpt/parallel/replicate.h"
#include "dpt/parallel/ring_schedule.h"
#include "dpt/train/stop_request.h"
#include "dpt/train/train_from_scratch.h"
#include "support/fault_injecting_communicator.h"
#include "support/reduce_expectations.h"
#include "test_support.h"

using dpt::Device;
using dpt::DType;
using dpt::Shape;
using dpt::Tensor;
using dpt::parallel::CollectiveAborted;
using dpt::parallel::Communicator;
using dpt::parallel::DevicePool;
using dpt::parallel::make_in_process_communicator;
using dpt::parallel::ReduceOp;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

namespace {
using dpt::parallel::cpu_devices;
using dpt::testing_support::kThreadSanitizer;
using dpt::testing_support::random_images;

// Generous: the work inside is milliseconds; only a hang (a rank never released) gets near.
constexpr auto kHangTimeout = kThreadSanitizer ? 120s : 30s;

// Runs `body` on its own thread and fails the whole binary if it has not finished within
// `timeout`: a rank that is never released would otherwise hang the test run forever (the
// future of a hung std::async could not even be destroyed, so the process exits at once).
template <class F>
void run_with_timeout(std::chrono::seconds timeout, F body) {
  auto done = std::async(std::launch::async, std::move(body));
  if (done.wait_for(timeout) == std::future_status::timeout) {
    ADD_FAILURE() << "timed out after " << timeout.count() << " s: a rank is hung";
    std::fprintf(stderr, "FATAL: %s timed out after %lld s (hang)\n",
                 ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                 static_cast<long long>(timeout.count()));
    std::fflush(stderr);
    std::_Exit(1);
  }
  done.get();  // rethrows what body threw
}

std::vector<float> random_floats(size_t count, uint64_t seed) {
  dpt::Rng rng(seed);
  std::vector<float> values(count);
  for (float& v : values) v = static_cast<float>(2.0 * dpt::uniform01(rng) - 1.0);
  return values;
}

// Element count of ring chunk c when `count` elements are cut into n near-equal parts (the
// first count % n chunks one larger), computed here independently of the communicator.
size_t ring_chunk_size(size_t count, int n, int c) { return count / n + (static_cast<size_t>(c) < count % n ? 1 : 0); }

// A pool of n single-core CPU devices whose failures abort `comm`, as ScratchTrainer wires it.
struct Ranks {
  explicit Ranks(std::string_view algorithm, int n)
      : comm(make_in_process_communicator(algorithm, n)), pool(cpu_devices(n), n) {
    pool.set_abort_hook([this] { comm->abort("a rank failed"); });
  }
  std::unique_ptr<Communicator> comm;  // declared first: destroyed after the pool's threads joined
  DevicePool pool;
};

// ---------------------------------------------------------------------------------------
// Collectives, for both in-process backends and 1..8 ranks.

class CollectiveTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  std::string algorithm() const { return std::get<0>(GetParam()); }
  int ranks() const { return std::get<1>(GetParam()); }
};

TEST_P(CollectiveTest, AllreduceSumMatchesSerialSumAndIsBitIdenticalOnEveryRank) {
  const int n = ranks();
  Ranks r(algorithm(), n);
  ASSERT_EQ(r.comm->size(), n);
  ASSERT_EQ(r.comm->name(), algorithm());

  std::set<size_t> sizes = {1, 2, 7, 100, 4097};
  if (n > 1) sizes.insert(static_cast<size_t>(n - 1));  // fewer elements than ranks: empty chunks
  sizes.insert(static_cast<size_t>(n));
  sizes.insert(static_cast<size_t>(n + 1));
  // 1000003 is prime: never divisible by n. Under TSan only for a few n, to stay quick.
  if (!kThreadSanitizer || n == 3 || n == 8) sizes.insert(1000003);

  run_with_timeout(kHangTimeout, [&] {
    for (const size_t count : sizes) {
      SCOPED_TRACE("count " + std::to_string(count));
      std::vector<std::vector<float>> inputs(n), buffers(n);
      for (int rank = 0; rank < n; ++rank) {
        inputs[rank] = random_floats(count, 1000 * count + rank);
        buffers[rank] = inputs[rank];
      }
      std::vector<size_t> bytes_before(n);
      for (int rank = 0; rank < n; ++rank) bytes_before[rank] = r.comm->bytes_received(rank);

      r.pool.run_all([&](int rank) { r.comm->allreduce_sum(rank, buffers[rank].data(), count); });

      // Against a serial double sum. The float sum of n terms is within (n-1) eps sum|x_i|
      // of the exact one whatever the order (eps = 2^-24, n <= 8: < 5e-7 sum|x_i|), so
      // 1e-5 relative to sum|x_i| (not to the sum, which may cancel to ~0) is ample and
      // still catches a missing or doubled term (an error of ~|x_i|).
      size_t bad = 0;
      for (size_t i = 0; i < count && bad < 5; ++i) {
        double exact = 0, magnitude = 0;
        for (int rank = 0; rank < n; ++rank) {
          exact += inputs[rank][i];
          magnitude += std::fabs(inputs[rank][i]);
        }
        const double tolerance = 1e-5 * magnitude + 1e-30;
        for (int rank = 0; rank < n; ++rank) {
          if (std::fabs(buffers[rank][i] - exact) > tolerance) {
            ++bad;
            ADD_FAILURE() << "rank " << rank << " element " << i << ": " << buffers[rank][i] << " != " << exact;
          }
        }
      }
      EXPECT_EQ(bad, 0u);
      // Every replica must apply the same update, so the sums must agree bit for bit.
      for (int rank = 1; rank < n; ++rank) {
        EXPECT_EQ(std::memcmp(buffers[rank].data(), buffers[0].data(), count * sizeof(float)), 0)
            << "rank " << rank << " differs from rank 0";
      }

      // Wire volume of this one allreduce.
      for (int rank = 0; rank < n; ++rank) {
        const size_t received = r.comm->bytes_received(rank) - bytes_before[rank];
        size_t expected = 0;
        if (algorithm() == "ring" && n > 1) {
          // Reduce-scatter brings every chunk but this rank's own (index rank); all-gather
          // every chunk but the one this rank finished (index rank + 1): 2 (n - 1) chunks.
          expected = (count - ring_chunk_size(count, n, rank)) + (count - ring_chunk_size(count, n, (rank + 1) % n));
          const double ideal = 2.0 * (n - 1) / n * static_cast<double>(count) * sizeof(float);
          EXPECT_LE(std::fabs(static_cast<double>(received) - ideal), 2.0 * (n - 1) * sizeof(float)) << "rank " << rank;
        } else if (algorithm() == "naive" && n > 1) {
          expected = rank == 0 ? (n - 1) * count : count;  // rank 0 gathers all; the rest copy back
        }
        EXPECT_EQ(received, expected * sizeof(float)) << "rank " << rank;
      }
    }
  });
}

TEST_P(CollectiveTest, BroadcastCopiesTheRootsBufferFromANonZeroRoot) {
  const int n = ranks();
  const int root = n - 1;  // non-zero whenever n > 1
  Ranks r(algorithm(), n);
  const size_t count = 1001;
  std::vector<std::vector<float>> buffers(n);
  for (int rank = 0; rank < n; ++rank) buffers[rank] = random_floats(count, 77 + rank);
  const std::vector<float> expected = buffers[root];
  std::vector<size_t> before(n);
  for (int rank = 0; rank < n; ++rank) before[rank] = r.comm->bytes_received(rank);

  run_with_timeout(kHangTimeout, [&] {
    r.pool.run_all([&](int rank) { r.comm->broadcast(rank, buffers[rank].data(), count, root); });
  });

  for (int rank = 0; rank < n; ++rank) {
    EXPECT_EQ(std::memcmp(buffers[rank].data(), expected.data(), count * sizeof(float)), 0) << "rank " << rank;
    EXPECT_EQ(r.comm->bytes_received(rank) - before[rank], rank == root ? 0 : count * sizeof(float));
  }
}

TEST_P(CollectiveTest, BarrierHoldsEveryRankUntilAllArrivedAndIsReusable) {
  const int n = ranks();
  Ranks r(algorithm(), n);
  constexpr int kRounds = 4;
  std::atomic<int> arrived{0};
  std::atomic<int> early{0};
  run_with_timeout(kHangTimeout, [&] {
    r.pool.run_all([&](int rank) {
      for (int round = 0; round < kRounds; ++round) {
        // The last rank is late: a barrier that lets anyone through early is seen here.
        if (rank == n - 1) std::this_thread::sleep_for(5ms);
        arrived.fetch_add(1);
        r.comm->barrier(rank);
        if (arrived.load() < n * (round + 1)) early.fetch_add(1);
      }
    });
  });
  EXPECT_EQ(early.load(), 0);
  EXPECT_EQ(arrived.load(), n * kRounds);
}

// Back-to-back collectives inside one task, each rank rewriting its buffer in between, as a
// training loop does: a collective must not return while a peer still reads this rank's
// buffer (ThreadSanitizer flags a missing barrier here even when the timing happens to
// work out). Small integers make every float sum exact, whatever the order.
TEST_P(CollectiveTest, BackToBackCollectivesMayReuseTheirBuffersAtOnce) {
  const int n = ranks();
  Ranks r(algorithm(), n);
  constexpr int kIterations = 20;
  const size_t count = 2 * static_cast<size_t>(n) + 3;
  std::atomic<int> wrong{0};
  run_with_timeout(kHangTimeout, [&] {
    r.pool.run_all([&](int rank) {
      std::vector<float> buffer(count);
      for (int iter = 0; iter < kIterations; ++iter) {
        const auto value = [&](int who, size_t i) {
          return static_cast<float>(who + 3 * iter + static_cast<int>(i % 5));
        };
        for (size_t i = 0; i < count; ++i) buffer[i] = value(rank, i);
        r.comm->allreduce_sum(rank, buffer.data(), count);
        for (size_t i = 0; i < count; ++i) {
          float expected = 0;
          for (int who = 0; who < n; ++who) expected += value(who, i);
          if (buffer[i] != expected) wrong.fetch_add(1);
        }
        const int root = iter % n;
        for (size_t i = 0; i < count; ++i) buffer[i] = value(rank, i) * 2;
        r.comm->broadcast(rank, buffer.data(), count, root);
        for (size_t i = 0; i < count; ++i) {
          if (buffer[i] != value(root, i) * 2) wrong.fetch_add(1);
        }
      }
    });
  });
  EXPECT_EQ(wrong.load(), 0);
}

// Rank 0 fails before its allreduce while the others wait inside theirs: the pool's abort
// hook must release them with CollectiveAborted, and run_all must rethrow rank 0's error.
TEST_P(CollectiveTest, FailingRankAbortsThePeersInsteadOfHangingThem) {
  const int n = ranks();
  Ranks r(algorithm(), n);
  std::vector<std::vector<float>> buffers(n, std::vector<float>(1000, 1.0f));
  // 0: did not finish, 1: CollectiveAborted, 2: another exception, 3: returned normally.
  std::vector<std::atomic<int>> outcome(n);
  for (auto& o : outcome) o = 0;

  run_with_timeout(kHangTimeout, [&] {
    try {
      r.pool.run_all([&](int rank) {
        try {
          if (rank == 0) {
            std::this_thread::sleep_for(50ms);  // the others are blocked in allreduce_sum by now
            throw std::runtime_error("rank 0 ran out of memory");
          }
          r.comm->allreduce_sum(rank, buffers[rank].data(), buffers[rank].size());
          outcome[rank] = 3;
        } catch (const CollectiveAborted&) {
          outcome[rank] = 1;
          throw;
        } catch (...) {
          outcome[rank] = 2;
          throw;
        }
      });
      ADD_FAILURE() << "run_all returned normally although rank 0 threw";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "rank 0 ran out of memory");
      EXPECT_EQ(dynamic_cast<const CollectiveAborted*>(&e), nullptr) << "a peer's error was rethrown";
    }
  });
  EXPECT_EQ(outcome[0].load(), 2);
  for (int rank = 1; rank < n; ++rank) EXPECT_EQ(outcome[rank].load(), 1) << "rank " << rank;

  // Aborting is for good: a later collective fails at once instead of waiting for peers.
  if (n > 1) {
    std::vector<float> one(1, 1.0f);
    run_with_timeout(kHangTimeout, [&] {
      EXPECT_THROW(r.comm->allreduce_sum(1, one.data(), 1), CollectiveAborted);
      EXPECT_THROW(r.comm->barrier(1), CollectiveAborted);
    });
  }
  // The pool itself is still usable.
  std::atomic<int> ran{0};
  r.pool.run_all([&](int) { ran.fetch_add(1); });
  EXPECT_EQ(ran.load(), n);
}

INSTANTIATE_TEST_SUITE_P(InProcess, CollectiveTest,
                         ::testing::Combine(::testing::Values("naive", "ring"), ::testing::Range(1, 9)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// Every ReduceOp on f32 and i64, against reduce_serially's direct expectation, on every
// rank, for counts not divisible by n and smaller than n (empty ring chunks).
template <class T>
void expect_allreduce_equals_serial(Ranks& r, int n, ReduceOp op, size_t count) {
  const DType type = std::is_same_v<T, float> ? DType::f32 : DType::i64;
  SCOPED_TRACE(dpt::testing_support::op_type_name(op, type) + ", count " + std::to_string(count));
  std::vector<std::vector<T>> inputs(n);
  for (int rank = 0; rank < n; ++rank) inputs[rank] = dpt::testing_support::reduce_test_input<T>(count, rank, count);
  std::vector<std::vector<T>> buffers = inputs;
  r.pool.run_all([&](int rank) { r.comm->allreduce(rank, buffers[rank].data(), count, op); });
  const std::vector<T> expected = dpt::testing_support::reduce_serially(inputs, op);
  for (int rank = 0; rank < n; ++rank) EXPECT_EQ(buffers[rank], expected) << "rank " << rank;
}

TEST_P(CollectiveTest, EveryReduceOpOnF32AndI64EqualsTheSerialReductionOnEveryRank) {
  const int n = ranks();
  Ranks r(algorithm(), n);
  std::set<size_t> sizes = {1, 7, 100, 4097};
  if (n > 1) sizes.insert(static_cast<size_t>(n - 1));
  sizes.insert(static_cast<size_t>(n + 1));
  run_with_timeout(kHangTimeout, [&] {
    for (const ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
      for (const size_t count : sizes) {
        expect_allreduce_equals_serial<float>(r, n, op, count);
        expect_allreduce_equals_serial<int64_t>(r, n, op, count);
      }
    }
  });
}

TEST_P(CollectiveTest, I64BroadcastCopiesTheRootsBufferAndCountsItsBytes) {
  const int n = ranks();
  const int root = n - 1;
  Ranks r(algorithm(), n);
  const size_t count = 33;
  std::vector<std::vector<int64_t>> buffers(n);
  for (int rank = 0; rank < n; ++rank) buffers[rank] = dpt::testing_support::reduce_test_input<int64_t>(count, rank, 5);
  const std::vector<int64_t> expected = buffers[root];
  std::vector<size_t> before(n);
  for (int rank = 0; rank < n; ++rank) before[rank] = r.comm->bytes_received(rank);
  run_with_timeout(kHangTimeout, [&] {
    r.pool.run_all([&](int rank) { r.comm->broadcast(rank, buffers[rank].data(), count, root); });
  });
  for (int rank = 0; rank < n; ++rank) {
    EXPECT_EQ(buffers[rank], expected) << "rank " << rank;
    EXPECT_EQ(r.comm->bytes_received(rank) - before[rank], rank == root ? 0 : count * sizeof(int64_t));
  }
}

TEST(Communicator, RejectsUnknownAlgorithmAndNoRanks) {
  EXPECT_INVALID_ARGUMENT(make_in_process_communicator("tree", 2), "unknown allreduce algorithm 'tree'");
  EXPECT_INVALID_ARGUMENT(make_in_process_communicator("ring", 0), "at least one rank");
}

// The ring's chunks tile the buffer in order, and each step's send is the receive of the
// right neighbour, in both phases (what lets one schedule serve threads and processes).
TEST(RingSchedule, ChunksTileTheBufferAndNeighboursStepsMatch) {
  for (int n = 1; n <= 5; ++n) {
    for (const size_t count : {size_t{0}, size_t{1}, size_t{4}, size_t{7}, size_t{100}}) {
      size_t next = 0;
      for (int c = 0; c < n; ++c) {
        const dpt::parallel::ring::Range range = dpt::parallel::ring::chunk(c, count, n);
        EXPECT_EQ(range.begin, next);
        EXPECT_EQ(range.size(), ring_chunk_size(count, n, c));
        next = range.end;
      }
      EXPECT_EQ(next, count);
      for (int rank = 0; rank < n; ++rank) {
        for (int step = 0; step + 1 < n; ++step) {
          const int right = (rank + 1) % n;
          for (const auto phase : {dpt::parallel::ring::reduce_scatter_step, dpt::parallel::ring::all_gather_step}) {
            EXPECT_EQ(phase(rank, step, n, count).send.begin, phase(right, step, n, count).receive.begin);
            EXPECT_EQ(phase(rank, step, n, count).send.end, phase(right, step, n, count).receive.end);
          }
        }
      }
    }
  }
}

// agree_on_stop: SIGINT on rank 1 and SIGTERM on rank 2 in the same step. The old rule
// averaged the signal numbers (round(17 / 2) = 9, SIGKILL, on rank 0); every rank must act
// on one agreed signal, the largest: SIGTERM.
TEST(AgreeOnStop, EveryRankReturnsTheSameSignalTheLargestAnyRankGot) {
  constexpr int n = 3;
  std::shared_ptr<Communicator> comm = make_in_process_communicator("ring", n);
  const auto agree = [&](std::vector<int> signals) {
    std::vector<int> agreed(n, -1);
    run_with_timeout(kHangTimeout, [&] {
      std::vector<std::thread> threads;
      for (int rank = 0; rank < n; ++rank) {
        threads.emplace_back([&, rank] {
          agreed[rank] = dpt::parallel::agree_on_stop(dpt::parallel::ProcessGroup{comm, rank}, signals[rank]);
        });
      }
      for (std::thread& t : threads) t.join();
    });
    return agreed;
  };
  const std::vector<int> both = agree({0, SIGINT, SIGTERM});
  for (int rank = 0; rank < n; ++rank) EXPECT_EQ(both[rank], SIGTERM) << "rank " << rank;
  const std::vector<int> one = agree({0, SIGINT, 0});
  for (int rank = 0; rank < n; ++rank) EXPECT_EQ(one[rank], SIGINT) << "rank " << rank;
  const std::vector<int> none = agree({0, 0, 0});
  for (int rank = 0; rank < n; ++rank) EXPECT_EQ(none[rank], 0) << "rank " << rank;
  EXPECT_EQ(dpt::parallel::agree_on_stop(dpt::parallel::ProcessGroup{}, SIGINT), SIGINT);  // no job
}

// ---------------------------------------------------------------------------------------
// Test-only fault injection (tests/support/fault_injecting_communicator.h).

using dpt::testing_support::Fault;
using dpt::testing_support::FaultInjectingCommunicator;
using dpt::testing_support::FaultMode;
using dpt::testing_support::parse_fault_spec;

TEST(FaultInjection, ParsesOneOrSeveralFaultsAndRefusesTyposNamingTheForm) {
  EXPECT_TRUE(parse_fault_spec("").empty());
  const std::vector<Fault> faults = parse_fault_spec("1:5:sigint,2:7:sigterm");
  ASSERT_EQ(faults.size(), 2u);
  EXPECT_EQ(faults[0].rank, 1);
  EXPECT_EQ(faults[0].call, 5);
  EXPECT_EQ(faults[0].mode, FaultMode::sigint);
  EXPECT_EQ(faults[1].rank, 2);
  EXPECT_EQ(faults[1].call, 7);
  EXPECT_EQ(faults[1].mode, FaultMode::sigterm);
  EXPECT_EQ(parse_fault_spec("0:1:exit")[0].mode, FaultMode::exit);
  EXPECT_EQ(parse_fault_spec("0:1:hang")[0].mode, FaultMode::hang);
  EXPECT_EQ(parse_fault_spec("0:1:throw")[0].mode, FaultMode::throw_error);
  for (const char* bad : {"1:5", "1:0:exit", "x:5:exit", "1:5:explode", "1:5:exit,", "1:5:exitx", "-1:5:exit"}) {
    EXPECT_INVALID_ARGUMENT(parse_fault_spec(bad), "DPT_TEST_MPI_FAULT must be RANK:CALL:MODE");
  }
}

// Rank 1 throws on entering its 3rd allreduce: the pool's abort hook aborts the wrapped
// communicator, which releases ranks 0 and 2 (blocked in that allreduce) with
// CollectiveAborted, and run_all rethrows rank 1's error. Up to then every call is
// forwarded, with the right sums.
TEST(FaultInjection, AThrowOnOneRankReleasesThePeersWithCollectiveAborted) {
  constexpr int n = 3;
  auto comm = std::make_shared<FaultInjectingCommunicator>(std::shared_ptr<Communicator>(make_in_process_communicator("ring", n)),
                                                           parse_fault_spec("1:3:throw"));
  DevicePool pool(cpu_devices(n), n);
  pool.set_abort_hook([&] { comm->abort("a rank failed"); });
  std::vector<std::atomic<int>> completed(n);
  std::vector<std::atomic<int>> aborted(n);
  run_with_timeout(kHangTimeout, [&] {
    try {
      pool.run_all([&](int rank) {
        for (int call = 1; call <= 5; ++call) {
          int64_t value = rank + 1;
          try {
            comm->allreduce(rank, &value, 1, ReduceOp::sum);
          } catch (const CollectiveAborted&) {
            aborted[rank] = call;
            throw;
          }
          if (value != 6) throw std::logic_error("wrong sum " + std::to_string(value));
          completed[rank] = call;
        }
      });
      ADD_FAILURE() << "run_all returned normally although rank 1 threw";
    } catch (const CollectiveAborted& e) {
      ADD_FAILURE() << "a peer's CollectiveAborted was rethrown: " << e.what();
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "injected error (DPT_TEST_MPI_FAULT) in allreduce 3");
    }
  });
  for (int rank = 0; rank < n; ++rank) EXPECT_EQ(completed[rank].load(), 2) << "rank " << rank;
  EXPECT_EQ(aborted[0].load(), 3);
  EXPECT_EQ(aborted[1].load(), 0);  // it threw the injected error, not CollectiveAborted
  EXPECT_EQ(aborted[2].load(), 3);
}

// sigint: the signal reaches the process (here the stop handler dptrain installs), and the
// collective still completes normally.
TEST(FaultInjection, ASignalFaultRaisesTheSignalAndCompletesTheCollective) {
  constexpr int n = 2;
  auto comm = std::make_shared<FaultInjectingCommunicator>(std::shared_ptr<Communicator>(make_in_process_communicator("naive", n)),
                                                           parse_fault_spec("1:2:sigint"));
  dpt::train::install_stop_handlers();
  dpt::train::request_stop(0);
  std::vector<std::vector<float>> buffers(n);
  run_with_timeout(kHangTimeout, [&] {
    std::vector<std::thread> threads;
    for (int rank = 0; rank < n; ++rank) {
      threads.emplace_back([&, rank] {
        for (int call = 1; call <= 2; ++call) {
          buffers[rank] = {static_cast<float>(rank), 1.5f};
          comm->allreduce(rank, buffers[rank].data(), 2, ReduceOp::max);
        }
      });
    }
    for (std::thread& t : threads) t.join();
  });
  EXPECT_EQ(dpt::train::stop_signal(), SIGINT);
  for (int rank = 0; rank < n; ++rank) EXPECT_EQ(buffers[rank], (std::vector<float>{1.0f, 1.5f})) << "rank " << rank;
  dpt::train::request_stop(0);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

// ---------------------------------------------------------------------------------------
// The lesson's single-caller allreduce and the per-rank gradient allreduce.

TEST(Allreduce, LessonAllreduceSumsOntoEveryTensor) {
  std::vector<Tensor> data = {Tensor::from_vector({1, 2, 3}, {3}), Tensor::from_vector({10, 20, 30}, {3}),
                              Tensor::from_vector({100, 200, 300}, {3})};
  dpt::parallel::allreduce(data);
  for (const Tensor& t : data) EXPECT_EQ(t.to_vector(), (std::vector<float>{111, 222, 333}));
  EXPECT_NE(data[0].data<float>(), data[1].data<float>());
  EXPECT_INVALID_ARGUMENT(dpt::parallel::allreduce({Tensor::zeros({3}), Tensor::zeros({4})}), "different sizes");
}

TEST(Allreduce, GradientsAreSummedAndAMissingGradientCountsAsZero) {
  constexpr int n = 2;
  Ranks r("ring", n);
  std::vector<std::vector<Tensor>> params(n);
  for (int rank = 0; rank < n; ++rank) {
    params[rank] = {Tensor::zeros({2, 3}).set_requires_grad(true), Tensor::zeros({4}).set_requires_grad(true)};
  }
  // Rank 0 has both gradients; rank 1 only the first (the loss did not reach the second).
  params[0][0].set_grad(Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}));
  params[0][1].set_grad(Tensor::from_vector({7, 8, 9, 10}, {4}));
  params[1][0].set_grad(Tensor::from_vector({10, 20, 30, 40, 50, 60}, {2, 3}));
  std::vector<std::vector<float>> flat(n);
  run_with_timeout(kHangTimeout, [&] {
    r.pool.run_all([&](int rank) { dpt::parallel::allreduce_gradients(*r.comm, rank, params[rank], flat[rank]); });
  });
  for (int rank = 0; rank < n; ++rank) {
    ASSERT_TRUE(params[rank][1].grad().defined()) << "rank " << rank;
    EXPECT_EQ(params[rank][0].grad().to_vector(), (std::vector<float>{11, 22, 33, 44, 55, 66})) << "rank " << rank;
    EXPECT_EQ(params[rank][1].grad().to_vector(), (std::vector<float>{7, 8, 9, 10})) << "rank " << rank;
    EXPECT_EQ(flat[rank].size(), 10u);
  }
}

// ---------------------------------------------------------------------------------------
// split_batch and replicate.

// X [batch, 1, 2, 3] whose values encode (row, position); y[i] = (7 * i) % 10.
std::pair<Tensor, Tensor> numbered_batch(int64_t batch) {
  std::vector<float> values(static_cast<size_t>(batch) * 6);
  for (size_t k = 0; k < values.size(); ++k) values[k] = static_cast<float>(k) + 0.5f;
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[i] = (7 * i) % 10;
  return {Tensor::from_vector(values, {batch, 1, 2, 3}), Tensor::from_labels(labels)};
}

void expect_split(int64_t batch, int devices, const std::vector<int64_t>& expected_rows) {
  SCOPED_TRACE(std::to_string(batch) + " over " + std::to_string(devices));
  const auto [X, y] = numbered_batch(batch);
  const std::vector<Device> devs = cpu_devices(devices);
  const std::vector<dpt::parallel::Shard> shards = dpt::parallel::split_batch(X, y, devs);
  ASSERT_EQ(shards.size(), expected_rows.size());
  const float* x = X.data<float>();
  const int64_t* labels = y.data<int64_t>();
  int64_t begin = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const int64_t rows = expected_rows[i];
    const Tensor& sx = shards[i].X;
    const Tensor& sy = shards[i].y;
    EXPECT_EQ(sx.shape(), (Shape{rows, 1, 2, 3})) << "shard " << i;
    EXPECT_EQ(sy.shape(), (Shape{rows})) << "shard " << i;
    EXPECT_EQ(sx.dtype(), DType::f32);
    EXPECT_EQ(sy.dtype(), DType::i64);
    EXPECT_EQ(sx.device(), devs[i]);
    EXPECT_EQ(sy.device(), devs[i]);
    EXPECT_EQ(std::memcmp(sx.data<float>(), x + begin * 6, static_cast<size_t>(rows) * 6 * sizeof(float)), 0)
        << "shard " << i << " does not hold rows " << begin << ".." << begin + rows;
    EXPECT_EQ(std::memcmp(sy.data<int64_t>(), labels + begin, static_cast<size_t>(rows) * sizeof(int64_t)), 0)
        << "shard " << i;
    // A shard is a copy, not a view: a device writing to it cannot touch the batch.
    EXPECT_NE(&sx.storage(), &X.storage());
    begin += rows;
  }
  EXPECT_EQ(begin, batch);
}

TEST(SplitBatch, SplitsInOrderWithTheRemainderOnTheFirstShards) {
  expect_split(256, 3, {86, 85, 85});
  expect_split(256, 2, {128, 128});
  expect_split(256, 1, {256});
  expect_split(13, 4, {4, 3, 3, 3});
  expect_split(3, 3, {1, 1, 1});
}

TEST(SplitBatch, RejectsABatchSmallerThanTheDeviceCount) {
  const auto [X, y] = numbered_batch(2);
  try {
    dpt::parallel::split_batch(X, y, cpu_devices(3));
    FAIL() << "split_batch accepted a batch of 2 for 3 devices";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "split_batch: a batch of 2 examples cannot be split over 3 devices; use a batch size of at "
                 "least 3 or fewer devices");
  }
  const auto [X4, y4] = numbered_batch(4);
  EXPECT_INVALID_ARGUMENT(dpt::parallel::split_batch(X4, y, cpu_devices(2)), "4 images but 2 labels");
  EXPECT_INVALID_ARGUMENT(dpt::parallel::split_batch(X4, y4, {}), "no devices");
}

TEST(Replicate, GivesEqualValuesInSeparateStorageRequiringGrad) {
  const std::vector<Tensor> params = dpt::nn::lenet_params(5, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  const std::vector<Tensor> copy = dpt::parallel::replicate(params, Device::cpu(1));
  ASSERT_EQ(copy.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    SCOPED_TRACE(params[i].name());
    EXPECT_EQ(copy[i].shape(), params[i].shape());
    EXPECT_EQ(copy[i].device(), Device::cpu(1));
    EXPECT_EQ(copy[i].name(), params[i].name());
    EXPECT_TRUE(copy[i].requires_grad());
    EXPECT_FALSE(copy[i].grad().defined());
    EXPECT_EQ(std::memcmp(copy[i].data<float>(), params[i].data<float>(), params[i].bytes()), 0);
    EXPECT_NE(&copy[i].storage(), &params[i].storage());
    // Writing to the replica leaves the original alone.
    const float before = params[i].data<float>()[0];
    copy[i].data<float>()[0] = before + 1.0f;
    EXPECT_EQ(params[i].data<float>()[0], before);
  }
  // A replica of a tensor that did not require grad requires it.
  EXPECT_TRUE(dpt::parallel::replicate({Tensor::zeros({2})}, Device::cpu(0))[0].requires_grad());
}

// ---------------------------------------------------------------------------------------
// parse_device_list and device names.

TEST(DeviceList, ParsesCountsAndCpuForms) {
  using dpt::parallel::parse_device_list;
  EXPECT_EQ(parse_device_list("cpu:2", 0), (std::vector<Device>{Device::cpu(0), Device::cpu(1)}));
  EXPECT_EQ(parse_device_list("cpu", 0), (std::vector<Device>{Device::cpu(0)}));
  EXPECT_EQ(parse_device_list("3", 0), (std::vector<Device>{Device::cpu(0), Device::cpu(1), Device::cpu(2)}));
  EXPECT_EQ(parse_device_list("cpu:2", 4), (std::vector<Device>{Device::cpu(0), Device::cpu(1)}));
  // With GPUs present, a count and a cuda list name GPUs.
  const Device cuda0{Device::Kind::cuda, 0}, cuda1{Device::Kind::cuda, 1};
  EXPECT_EQ(parse_device_list("2", 2), (std::vector<Device>{cuda0, cuda1}));
  EXPECT_EQ(parse_device_list("cuda:1", 2), (std::vector<Device>{cuda1}));
  EXPECT_EQ(parse_device_list("cuda:1,cuda:0", 2), (std::vector<Device>{cuda1, cuda0}));
  // A GPU named twice: two replicas on it, reduced over the host ring (NCCL refuses).
  EXPECT_EQ(parse_device_list("cuda:0,cuda:0", 1), (std::vector<Device>{cuda0, cuda0}));
  EXPECT_TRUE(dpt::parallel::has_repeated_device({cuda0, cuda0}));
  EXPECT_FALSE(dpt::parallel::has_repeated_device({cuda1, cuda0}));
  EXPECT_EQ(dpt::parallel::make_communicator({cuda0, cuda0}, "ring")->name(),
            dpt::parallel::make_in_process_communicator("ring", 2)->name());
}

TEST(DeviceList, RejectsMalformedTextAndAbsentDevices) {
  using dpt::parallel::parse_device_list;
  EXPECT_INVALID_ARGUMENT(parse_device_list("cuda:0", 0), "not present");
  EXPECT_CONFIG_ERROR(parse_device_list("cuda:0", 0), "devices", "`devices` cpu:N");  // names the fix
  EXPECT_INVALID_ARGUMENT(parse_device_list("cuda:2", 2), "not present");
  EXPECT_INVALID_ARGUMENT(parse_device_list("3", 2), "not present");
  EXPECT_INVALID_ARGUMENT(parse_device_list("cpu:0", 0), "cpu:N needs N >= 1");
  EXPECT_INVALID_ARGUMENT(parse_device_list("cpu:x", 0), "cpu:N needs N >= 1");
  EXPECT_INVALID_ARGUMENT(parse_device_list("cpu:-2", 0), "cpu:N needs N >= 1");
  EXPECT_CONFIG_ERROR(parse_device_list("gpu:1", 0), "devices", "bad `devices` 'gpu:1': expected cpu:N");
  EXPECT_CONFIG_ERROR(parse_device_list("", 0), "devices", "bad `devices` '': expected cpu:N");
  EXPECT_INVALID_ARGUMENT(parse_device_list("0", 0), "need at least one device");
  EXPECT_INVALID_ARGUMENT(parse_device_list("-1", 0), "need at least one device");
  EXPECT_INVALID_ARGUMENT(parse_device_list("cuda:0,", 1), "expected cpu:N");
  EXPECT_INVALID_ARGUMENT(parse_device_list("cpu:1,cuda:0", 1), "list CPU devices as a count");
}

TEST(DeviceList, DeviceNamesPrintAsInTheLesson) {
  EXPECT_EQ(Device::cpu(0).str(), "cpu:0");
  EXPECT_EQ((Device{Device::Kind::cuda, 1}).str(), "cuda:1");
  EXPECT_EQ(dpt::device_list_str({Device::cpu(0), Device::cpu(1)}), "[cpu:0, cpu:1]");
  EXPECT_EQ(dpt::device_list_str({}), "[]");
}

// ---------------------------------------------------------------------------------------
// DevicePool.

TEST(DevicePool, RunAllRunsEveryRankOnceOnItsOwnPersistentThread) {
  constexpr int n = 4;
  DevicePool pool(cpu_devices(n), n);
  EXPECT_EQ(pool.size(), n);
  EXPECT_EQ(pool.devices(), cpu_devices(n));
  std::vector<std::thread::id> first(n), second(n);
  std::vector<std::atomic<int>> calls(n);
  for (auto& c : calls) c = 0;
  // Every rank waits until all have started: run_all must run them at once, not in turn.
  std::atomic<int> started{0};
  run_with_timeout(kHangTimeout, [&] {
    pool.run_all([&](int rank) {
      first[rank] = std::this_thread::get_id();
      calls[rank].fetch_add(1);
      started.fetch_add(1);
      while (started.load() < n) std::this_thread::yield();
    });
  });
  pool.run_all([&](int rank) {
    second[rank] = std::this_thread::get_id();
    calls[rank].fetch_add(1);
  });
  const std::set<std::thread::id> distinct(first.begin(), first.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(n));
  EXPECT_EQ(distinct.count(std::this_thread::get_id()), 0u) << "a rank ran on the caller's thread";
  EXPECT_EQ(first, second) << "workers must persist across run_all calls";
  for (int rank = 0; rank < n; ++rank) EXPECT_EQ(calls[rank].load(), 2) << "rank " << rank;

  // run_on runs on that rank's worker alone.
  std::vector<std::thread::id> on(n);
  for (int rank = n - 1; rank >= 0; --rank) pool.run_on(rank, [&, rank] { on[rank] = std::this_thread::get_id(); });
  EXPECT_EQ(on, first);
  int runs = 0;
  pool.run_on(2, [&] { ++runs; });
  EXPECT_EQ(runs, 1);
  EXPECT_THROW(pool.run_on(n, [] {}), std::out_of_range);
  EXPECT_THROW(pool.run_on(-1, [] {}), std::out_of_range);
  EXPECT_THROW(pool.run_on(1, [] { throw std::logic_error("from rank 1"); }), std::logic_error);
}

TEST(DevicePool, RethrowsTheFirstErrorAfterEveryRankFinished) {
  constexpr int n = 3;
  DevicePool pool(cpu_devices(n), n);
  std::atomic<int> finished{0};
  run_with_timeout(kHangTimeout, [&] {
    EXPECT_THROW(pool.run_all([&](int rank) {
      if (rank == 1) throw std::domain_error("rank 1 failed");
      std::this_thread::sleep_for(20ms);
      finished.fetch_add(1);
    }),
                 std::domain_error);
  });
  EXPECT_EQ(finished.load(), n - 1) << "run_all returned before the healthy ranks finished";
  // The error does not stick: the next run_all succeeds.
  EXPECT_NO_THROW(pool.run_all([](int) {}));
}

// The abort hook runs on the failing worker. run_all must not return before it has
// finished, or its caller may destroy what the hook touches (ScratchTrainer's communicator)
// while the hook still runs. Here the healthy ranks finish while the hook is still busy.
TEST(DevicePool, AbortHookHasFinishedWhenRunAllReturns) {
  constexpr int n = 3;
  DevicePool pool(cpu_devices(n), n);
  std::atomic<bool> hook_running{false}, hook_done{false};
  pool.set_abort_hook([&] {
    hook_running = true;
    std::this_thread::sleep_for(100ms);
    hook_done = true;
  });
  for (int trial = 0; trial < 2; ++trial) {
    hook_running = false;
    hook_done = false;
    run_with_timeout(kHangTimeout, [&] {
      EXPECT_THROW(pool.run_all([&](int rank) {
        if (rank == 1) throw std::runtime_error("early failure");
        // The others end while the hook sleeps.
        while (!hook_running.load()) std::this_thread::yield();
        std::this_thread::sleep_for(10ms);
      }),
                   std::runtime_error);
    });
    EXPECT_TRUE(hook_done.load()) << "run_all returned while the abort hook was still running";
  }
}

TEST(DevicePool, SplitsTheCoresBetweenCpuDevices) {
  EXPECT_EQ(DevicePool(cpu_devices(2), 4).threads_per_device(), 2);
  EXPECT_EQ(DevicePool(cpu_devices(3), 1).threads_per_device(), 1);
  EXPECT_EQ(DevicePool(cpu_devices(3), 8).threads_per_device(), 2);
  EXPECT_EQ(DevicePool(cpu_devices(1), 2).threads_per_device(), 2);
  EXPECT_GE(dpt::parallel::available_cores(), 1);
  EXPECT_THROW(DevicePool({}, 2), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------
// Data-parallel training computes the same step on N devices as on one.

dpt::train::ScratchConfig config_for(int devices, const std::string& allreduce) {
  dpt::train::ScratchConfig config;
  config.devices = cpu_devices(devices);
  config.engine.allreduce = allreduce;
  config.engine.cores = devices;  // one thread per device: no OpenMP team (and TSan-clean)
  config.lr = 0.5f;        // large enough that every layer visibly moves in a step or three
  config.training.batch_size = 13;
  return config;
}

std::vector<std::vector<float>> snapshot(const std::vector<Tensor>& params) {
  std::vector<std::vector<float>> values;
  for (const Tensor& p : params) values.push_back(p.to_vector());
  return values;
}

// Every replica must hold exactly the same bits: they applied the same summed gradient.
void expect_replicas_bit_identical(const dpt::train::ScratchTrainer& trainer) {
  const auto& replicas = trainer.device_params();
  for (size_t d = 1; d < replicas.size(); ++d) {
    ASSERT_EQ(replicas[d].size(), replicas[0].size());
    for (size_t i = 0; i < replicas[0].size(); ++i) {
      EXPECT_EQ(std::memcmp(replicas[d][i].data<float>(), replicas[0][i].data<float>(), replicas[0][i].bytes()), 0)
          << "replica " << d << " differs from replica 0 in " << replicas[0][i].name();
      EXPECT_NE(&replicas[d][i].storage(), &replicas[0][i].storage()) << "replicas share storage";
    }
  }
}

// Parameters after the step on N devices against those on one device. The two differ only
// in the order of float additions: each shard's gradient is a sum over fewer examples
// (inside oneDNN's reductions), and the N partial sums are then added by the allreduce.
// Each such reordering perturbs a gradient by a few float ulps of the magnitudes summed,
// i.e. a relative ~1e-6 of the step (lr/B * grad), plus the final rounding of the parameter
// (half an ulp, 6e-8 |p|). So we allow, per element of each tensor,
//     |p_N - p_1| <= 1e-7 + 1e-6 |p_1| + 1e-3 max|p_1 - p_0|,
// where max|p_1 - p_0| is that tensor's largest total movement. On this machine the worst
// difference is under 2% of that bound; while a step off by one twelfth (dividing by 13
// instead of 12) already exceeds it 6 to 280 times in every tensor, and real mistakes (a
// shard's gradient missing or counted twice, the shard size instead of the global batch, a
// skipped update) are larger still. expect_params_moved checks the step is not a no-op.
void expect_close_to_reference(const std::vector<Tensor>& got, const std::vector<std::vector<float>>& reference,
                               const std::vector<std::vector<float>>& initial) {
  ASSERT_EQ(got.size(), reference.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<float> values = got[i].to_vector();
    ASSERT_EQ(values.size(), reference[i].size());
    float max_step = 0;
    for (size_t k = 0; k < values.size(); ++k)
      max_step = std::max(max_step, std::fabs(reference[i][k] - initial[i][k]));
    size_t bad = 0;
    double worst = 0;
    for (size_t k = 0; k < values.size(); ++k) {
      const double diff = std::fabs(static_cast<double>(values[k]) - reference[i][k]);
      const double tolerance = 1e-7 + 1e-6 * std::fabs(reference[i][k]) + 1e-3 * max_step;
      worst = std::max(worst, diff / tolerance);
      if (diff > tolerance && ++bad <= 3) {
        ADD_FAILURE() << got[i].name() << "[" << k << "]: " << values[k] << " vs 1-device " << reference[i][k]
                      << " (step size " << max_step << ")";
      }
    }
    EXPECT_EQ(bad, 0u) << got[i].name() << ": worst diff/tolerance " << worst;
  }
}

// The step must really move every tensor, by far more than the equivalence tolerance:
// otherwise a no-op step would pass the comparison above.
void expect_params_moved(const std::vector<std::vector<float>>& after, const std::vector<std::vector<float>>& before,
                         const std::vector<Tensor>& names) {
  for (size_t i = 0; i < after.size(); ++i) {
    float max_step = 0, max_value = 0;
    for (size_t k = 0; k < after[i].size(); ++k) {
      max_step = std::max(max_step, std::fabs(after[i][k] - before[i][k]));
      max_value = std::max(max_value, std::fabs(after[i][k]));
    }
    EXPECT_GT(max_step, 1e-7f + 1e-4f * max_value) << names[i].name() << " did not move in the step";
  }
}

class EquivalenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EquivalenceTest, OneStepOnNDevicesMatchesOneDeviceAndReplicasAreBitIdentical) {
  const std::string algorithm = GetParam();
  const std::vector<Tensor> initial_params = dpt::nn::lenet_params(/*seed=*/42, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  const std::vector<std::vector<float>> initial = snapshot(initial_params);
  for (const int64_t batch : {12, 13}) {  // 12: even splits over 1..4 devices; 13: uneven
    const auto [X, y] = random_images(batch, /*seed=*/batch);
    dpt::train::ScratchTrainer single(config_for(1, algorithm), initial_params);
    dpt::parallel::StepResult reference_step;
    run_with_timeout(kHangTimeout, [&] { reference_step = single.train_batch(X, y); });
    const std::vector<std::vector<float>> reference = snapshot(single.device_params()[0]);
    // The trainer copied the initial parameters rather than stepping on them in place.
    EXPECT_EQ(snapshot(initial_params), initial);
    expect_params_moved(reference, initial, initial_params);
    EXPECT_EQ(reference_step.examples, batch);
    EXPECT_TRUE(std::isfinite(reference_step.loss_sum));
    // Weights are N(0, 0.01^2): the logits start near 0, so the summed loss is ~B ln 10.
    EXPECT_NEAR(reference_step.loss_sum, static_cast<double>(batch) * std::log(10.0), 0.05 * batch);

    for (const int devices : {2, 3, 4}) {
      SCOPED_TRACE(algorithm + ", batch " + std::to_string(batch) + " over " + std::to_string(devices) + " devices");
      dpt::train::ScratchTrainer trainer(config_for(devices, algorithm), initial_params);
      ASSERT_EQ(trainer.devices(), cpu_devices(devices));
      dpt::parallel::StepResult step;
      run_with_timeout(kHangTimeout, [&] { step = trainer.train_batch(X, y); });
      EXPECT_EQ(step.examples, batch);
      EXPECT_NEAR(step.loss_sum, reference_step.loss_sum, 1e-5 * std::fabs(reference_step.loss_sum));
      // Predictions agree too, up to an argmax flipped by float noise between near-equal logits.
      EXPECT_NEAR(static_cast<double>(step.correct), static_cast<double>(reference_step.correct), 1.0);
      ASSERT_EQ(trainer.device_params().size(), static_cast<size_t>(devices));
      expect_replicas_bit_identical(trainer);
      expect_close_to_reference(trainer.device_params()[0], reference, initial);
      for (const auto& replica : trainer.device_params()) {
        for (const Tensor& p : replica) EXPECT_FALSE(p.grad().defined()) << p.name() << ": SGD left a gradient";
      }
    }
  }
}

TEST_P(EquivalenceTest, ThreeStepsOnTwoDevicesMatchOneDevice) {
  const std::string algorithm = GetParam();
  const std::vector<Tensor> initial_params = dpt::nn::lenet_params(/*seed=*/7, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  const std::vector<std::vector<float>> initial = snapshot(initial_params);
  dpt::train::ScratchTrainer single(config_for(1, algorithm), initial_params);
  dpt::train::ScratchTrainer pair(config_for(2, algorithm), initial_params);
  std::vector<std::vector<float>> previous = initial;
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step + 1));
    const auto [X, y] = random_images(13, /*seed=*/100 + step);  // 13: 7 + 6
    run_with_timeout(kHangTimeout, [&] {
      single.train_batch(X, y);
      pair.train_batch(X, y);
    });
    const std::vector<std::vector<float>> reference = snapshot(single.device_params()[0]);
    expect_params_moved(reference, previous, initial_params);
    expect_replicas_bit_identical(pair);
    // Against the total movement so far: errors of earlier steps carry over.
    expect_close_to_reference(pair.device_params()[0], reference, initial);
    previous = reference;
  }
}

// Two OpenMP threads per device (4 cores' worth over 2 devices, oversubscribed on a small
// machine): every kernel with an OpenMP team (our LeNet kernels, where the CPU has AVX-512,
// and oneDNN's) runs beside the other device's team. The same steps as one thread per
// device, up to the order of oneDNN's per-thread sums. Under scripts/test-tsan.sh the
// teams are LLVM's OpenMP runtime with its Archer tool, so that ThreadSanitizer sees their
// barriers and checks these kernels for races.
TEST(EquivalenceTest, TwoOpenMpThreadsPerDeviceStepAsOneThreadDoes) {
  const std::vector<Tensor> initial_params = dpt::nn::lenet_params(/*seed=*/11, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  const std::vector<std::vector<float>> initial = snapshot(initial_params);
  dpt::train::ScratchConfig one_thread = config_for(2, "ring");
  dpt::train::ScratchConfig two_threads = one_thread;
  two_threads.engine.cores = 4;
  ASSERT_EQ(dpt::parallel::DevicePool(two_threads.devices, two_threads.engine.cores).threads_per_device(), 2);
  dpt::train::ScratchTrainer reference(one_thread, initial_params);
  dpt::train::ScratchTrainer teams(two_threads, initial_params);
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step + 1));
    const auto [X, y] = random_images(26, /*seed=*/300 + step);
    run_with_timeout(kHangTimeout, [&] {
      reference.train_batch(X, y);
      teams.train_batch(X, y);
    });
    expect_replicas_bit_identical(teams);
    expect_close_to_reference(teams.device_params()[0], snapshot(reference.device_params()[0]), initial);
  }
  expect_params_moved(snapshot(teams.device_params()[0]), initial, initial_params);
}

INSTANTIATE_TEST_SUITE_P(Allreduce, EquivalenceTest, ::testing::Values("naive", "ring"),
                         [](const auto& info) { return std::string(info.param); });

// Both APIs run on one replica engine, so the from-scratch trainer takes an epoch's last
// batch smaller than its devices as DataParallel does: the first devices compute, the idle
// one joins the allreduce adding nothing, and the step is exactly the 2-device step.
TEST(ScratchTrainer, ABatchSmallerThanTheDevicesIsTheStepOfTheFirstDevices) {
  for (const char* algorithm : {"naive", "ring"}) {
    SCOPED_TRACE(algorithm);
    const std::vector<Tensor> initial_params = dpt::nn::lenet_params(/*seed=*/5, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
    const auto [X, y] = random_images(2, /*seed=*/9);
    dpt::train::ScratchTrainer two(config_for(2, algorithm), initial_params);
    dpt::train::ScratchTrainer three(config_for(3, algorithm), initial_params);
    dpt::parallel::StepResult a, b;
    run_with_timeout(kHangTimeout, [&] {
      a = two.train_batch(X, y);
      b = three.train_batch(X, y);
    });
    EXPECT_EQ(b.examples, 2);
    EXPECT_EQ(b.loss_sum, a.loss_sum);
    EXPECT_EQ(b.correct, a.correct);
    expect_replicas_bit_identical(three);
    EXPECT_EQ(snapshot(three.device_params()[2]), snapshot(two.device_params()[0]));
    expect_params_moved(snapshot(three.device_params()[2]), snapshot(initial_params), initial_params);
  }
}

// A shard that fails on one device (a bad label in the last rows) must end the step on
// every device with that device's error, not hang the others in the allreduce.
TEST(ScratchTrainer, AFailingDeviceEndsTheStepEverywhere) {
  for (const char* algorithm : {"naive", "ring"}) {
    SCOPED_TRACE(algorithm);
    dpt::train::ScratchTrainer trainer(config_for(3, algorithm), dpt::nn::lenet_params(1, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses));
    auto [X, y] = random_images(9, 3);
    y.data<int64_t>()[8] = 10;  // only the third shard (rows 6..8) sees it
    run_with_timeout(kHangTimeout, [&] {
      EXPECT_INVALID_ARGUMENT(trainer.train_batch(X, y), "label 10");
      // The communicator stays aborted: later steps fail at once rather than hang.
      y.data<int64_t>()[8] = 1;
      EXPECT_THROW(trainer.train_batch(X, y), CollectiveAborted);
    });
  }
}

// Evaluation splits every test batch over the devices (batches of 6 over 3 devices, and a
// last batch of 2 that only the first two take). The labels are chosen so that exactly the
// images with i % 3 != 0 are right by one plain forward pass on the calling thread: a
// shard dropped, counted twice or judged by the wrong replica changes the count.
TEST(ScratchTrainer, EvaluationSplitOverTheDevicesCountsEveryTestImageOnce) {
  std::vector<Tensor> params = dpt::nn::lenet_params(11, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  for (Tensor& p : params) {  // N(0, 0.01) weights give every image the same argmax
    for (float& v : std::span(p.data<float>(), static_cast<size_t>(p.numel()))) v *= 40.0f;
  }
  dpt::data::InMemoryDataset test;
  test.rows = test.cols = 28;
  const int64_t n = 20;
  dpt::Rng rng(5);
  for (int64_t i = 0; i < n * 28 * 28; ++i) test.pixels.push_back(static_cast<uint8_t>(rng() % 256));
  test.labels.assign(static_cast<size_t>(n), 0);
  dpt::data::BatchLoader whole(test, n, /*shuffle=*/false, 0);
  whole.start_epoch(0);
  dpt::data::Batch all;
  ASSERT_TRUE(whole.next(all));
  const std::vector<float> logits = dpt::nn::lenet(all.images, params).detach().to_vector();
  std::set<int64_t> predicted;
  for (int64_t i = 0; i < n; ++i) {
    const auto row = logits.begin() + i * 10;
    const int64_t argmax = std::max_element(row, row + 10) - row;
    predicted.insert(argmax);
    test.labels[static_cast<size_t>(i)] = i % 3 != 0 ? argmax : (argmax + 1) % 10;
  }
  ASSERT_GT(predicted.size(), 1u) << "the scaled parameters must tell the images apart";
  for (int devices : {1, 3}) {
    dpt::train::ScratchTrainer trainer(config_for(devices, "ring"), params);
    EXPECT_DOUBLE_EQ(trainer.evaluate_accuracy(test, 6), 13.0 / 20.0) << devices << " devices";
  }
}

TEST(ScratchTrainer, RejectsABadConfig) {
  const std::vector<Tensor> params = dpt::nn::lenet_params(0, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  auto config = config_for(2, "tree");
  EXPECT_INVALID_ARGUMENT((void)dpt::train::ScratchTrainer(config, params), "unknown allreduce algorithm");
  config = config_for(4, "ring");
  config.training.batch_size = 3;
  EXPECT_CONFIG_ERROR((void)dpt::train::ScratchTrainer(config, params), "batch_size",
                      "`batch_size` 3 is smaller than the 4 devices");
}

}  // namespace
