// The dptrain command line as a library: parsing argv into a training job and running it,
// so that test programs can run the real CLI in-process (e.g. under mpirun) with hooks.
#pragma once

#include <functional>
#include <memory>

#include "dpt/parallel/communicator.h"

namespace dpt::cli {

// Seams for tests; the dptrain executable passes none.
struct CliHooks {
  // Applied, when set, to the MPI communicator the job creates (--dist mpi) before training
  // uses it: tests wrap it to inject faults.
  std::function<std::shared_ptr<parallel::Communicator>(std::shared_ptr<parallel::Communicator>)> wrap_communicator;
  // report::JobHooks::check_replicas: tests turn it off to measure a broken allreduce.
  bool check_replicas = true;
};

// `dptrain ARGS...`: the exit status (0, 1 for an error, 128 + N when stopped by signal N;
// under MPI an error ends the whole job with MPI_Abort instead of returning).
int run(int argc, char** argv, const CliHooks& hooks = {});

}  // namespace dpt::cli
