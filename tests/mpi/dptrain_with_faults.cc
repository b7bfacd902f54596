// dptrain with test-only fault injection, for tests/mpi/dptrain_mpi_fault.sh: the real CLI
// (dpt::cli::run) with its MPI communicator wrapped in a FaultInjectingCommunicator built
// from $DPT_TEST_MPI_FAULT (tests/support/fault_injecting_communicator.h). The library and
// the dptrain executable carry no fault injection of their own.
//
// With $DPT_TEST_STATUS_DIR set, each rank writes the status run() returned to
// "$DPT_TEST_STATUS_DIR/rankR.status", so that a test can check every rank's exit status
// (mpirun itself reports only one).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "../support/fault_injecting_communicator.h"
#include "cli.h"

namespace {

void write_status(int rank, int status) {
  const char* dir = std::getenv("DPT_TEST_STATUS_DIR");
  if (!dir || !*dir) return;
  const std::string path = std::string(dir) + "/rank" + std::to_string(rank) + ".status";
  if (FILE* file = std::fopen(path.c_str(), "w")) {
    std::fprintf(file, "%d\n", status);
    std::fclose(file);
  } else {
    std::fprintf(stderr, "dptrain_with_faults: cannot write %s\n", path.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rank = 0;  // this process's rank, learnt while MPI runs (run() finalises it)
  dpt::cli::CliHooks hooks;
  hooks.wrap_communicator = [&rank](std::shared_ptr<dpt::parallel::Communicator> comm) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return std::make_shared<dpt::testing_support::FaultInjectingCommunicator>(
        std::move(comm), dpt::testing_support::fault_spec_from_env());
  };
  const int status = dpt::cli::run(argc, argv, hooks);
  write_status(rank, status);
  return status;
}
