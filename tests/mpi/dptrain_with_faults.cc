// dptrain with test-only fault injection, for tests/mpi/dptrain_mpi_fault.sh: the real CLI
// (dpt::cli::run) with its MPI communicator wrapped in a FaultInjectingCommunicator built
// from $DPT_TEST_MPI_FAULT (tests/support/fault_injecting_communicator.h). The library and
// the dptrain executable carry no fault injection of their own.
//
// With DPT_TEST_GRADIENT_ALLREDUCE=noop the gradients are not summed across the ranks
// (tests/support/no_op_gradient_allreduce.h) and the replica check is off, so that a test
// sees the accuracy a broken allreduce reaches against its bar (tests/data/formats.sh).
//
// With $DPT_TEST_STATUS_DIR set, each rank writes its process id to
// "$DPT_TEST_STATUS_DIR/rankR.pid" once MPI has started (so that a test can signal one rank
// by its number), and the status run() returned to "$DPT_TEST_STATUS_DIR/rankR.status", so
// that a test can check every rank's exit status (mpirun itself reports only one).
#include <mpi.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "../support/fault_injecting_communicator.h"
#include "../support/no_op_gradient_allreduce.h"
#include "cli.h"

namespace {

// Writes VALUE to "$DPT_TEST_STATUS_DIR/rankR.SUFFIX" (nothing without the variable): first
// to a temporary name, then renamed, so that a test polling for the file reads it whole.
void write_rank_file(int rank, const char* suffix, long value) {
  const char* dir = std::getenv("DPT_TEST_STATUS_DIR");
  if (!dir || !*dir) return;
  const std::string path = std::string(dir) + "/rank" + std::to_string(rank) + "." + suffix;
  const std::string partial = path + ".partial";
  if (FILE* file = std::fopen(partial.c_str(), "w")) {
    std::fprintf(file, "%ld\n", value);
    std::fclose(file);
    std::rename(partial.c_str(), path.c_str());
  } else {
    std::fprintf(stderr, "dptrain_with_faults: cannot write %s\n", partial.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rank = 0;  // this process's rank, learnt while MPI runs (run() finalises it)
  const char* gradient_allreduce = std::getenv("DPT_TEST_GRADIENT_ALLREDUCE");
  const bool no_op_gradients = gradient_allreduce && std::string(gradient_allreduce) == "noop";
  dpt::cli::CliHooks hooks;
  hooks.wrap_communicator = [&rank, no_op_gradients](std::shared_ptr<dpt::parallel::Communicator> comm) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    write_rank_file(rank, "pid", static_cast<long>(getpid()));
    if (no_op_gradients) comm = std::make_shared<dpt::testing_support::NoOpGradientAllreduce>(std::move(comm));
    return std::make_shared<dpt::testing_support::FaultInjectingCommunicator>(
        std::move(comm), dpt::testing_support::fault_spec_from_env());
  };
  // A broken gradient allreduce runs to the end, to report the accuracy it reaches.
  hooks.check_replicas = !no_op_gradients;
  const int status = dpt::cli::run(argc, argv, hooks);
  write_rank_file(rank, "status", status);
  return status;
}
