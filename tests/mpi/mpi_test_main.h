// main() for the GoogleTest programs that mpirun starts once per rank: MPI for the whole
// run, every rank runs every test (the collectives need them all), rank 0 alone prints
// the progress, and the program fails on every rank when a test failed on any rank. The
// other ranks print each failure of theirs to stderr, prefixed "[rank R]" (mpirun passes
// every rank's stderr on), and rank 0 names the ranks that failed.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "dpt/parallel/mpi_communicator.h"

namespace dpt::testing_support {

// Set by main before the tests run.
inline dpt::parallel::MpiRuntime* g_mpi = nullptr;

// On ranks other than 0: every failed assertion, with its test, file, line and message.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  // The test's name is kept here: UnitTest::current_test_info() would take the lock that
  // GoogleTest holds while it reports a part result (a deadlock).
  void OnTestStart(const ::testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] FAILED %s at %s:%d:\n%s\n", rank_, test_.c_str(),
                 result.file_name() ? result.file_name() : "?", result.line_number(), result.message());
    std::fflush(stderr);
  }

 private:
  int rank_;
  std::string test_;
};

inline int run_mpi_tests(int argc, char** argv) {
  dpt::parallel::MpiRuntime mpi;
  g_mpi = &mpi;
  ::testing::InitGoogleTest(&argc, argv);
  if (mpi.rank() != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(mpi.rank()));
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  // Agree on the verdict, so mpirun's exit status says whether any rank failed, and tell
  // rank 0 which ranks did.
  auto comm = mpi.communicator("ring", 60);
  std::vector<int64_t> by_rank(static_cast<size_t>(mpi.size()), 0);
  by_rank[static_cast<size_t>(mpi.rank())] = failed;
  comm->allreduce(mpi.rank(), by_rank.data(), by_rank.size(), dpt::parallel::ReduceOp::max);
  std::string others;
  int64_t any = 0;
  for (int r = 0; r < mpi.size(); ++r) {
    any = std::max(any, by_rank[static_cast<size_t>(r)]);
    if (r != 0 && by_rank[static_cast<size_t>(r)] != 0) others += (others.empty() ? "" : ", ") + std::to_string(r);
  }
  if (mpi.rank() == 0 && !others.empty()) {
    std::fprintf(stderr, "tests failed on rank(s) %s: their failures are printed above, each prefixed [rank R]\n",
                 others.c_str());
  }
  comm.reset();
  return any > 0 ? 1 : 0;
}

}  // namespace dpt::testing_support
