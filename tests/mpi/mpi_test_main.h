// main() for the GoogleTest programs that mpirun starts once per rank: MPI for the whole
// run, every rank runs every test (the collectives need them all), rank 0 alone prints
// the progress, and the program fails on every rank when a test failed on any rank.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "dpt/parallel/mpi_communicator.h"

namespace dpt::testing_support {

// Set by main before the tests run.
inline dpt::parallel::MpiRuntime* g_mpi = nullptr;

inline int run_mpi_tests(int argc, char** argv) {
  dpt::parallel::MpiRuntime mpi;
  g_mpi = &mpi;
  ::testing::InitGoogleTest(&argc, argv);
  if (mpi.rank() != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  // Agree on the verdict, so mpirun's exit status says whether any rank failed.
  auto comm = mpi.communicator("ring", 60);
  int64_t any = failed;
  comm->allreduce(mpi.rank(), &any, 1, dpt::parallel::ReduceOp::max);
  if (any > 0 && mpi.rank() == 0 && !failed) std::fprintf(stderr, "a test failed on another rank\n");
  comm.reset();
  return any > 0 ? 1 : 0;
}

}  // namespace dpt::testing_support
