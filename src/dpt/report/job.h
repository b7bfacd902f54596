// A whole training job, as the dptrain command line runs it: check the configuration, set
// the convolutions' precision, join the other processes of a multi-process job (MPI), open
// the reports, load Fashion-MNIST, print what is about to happen, train with the chosen API
// and print its summary. Errors are printed here, in one form for every front end.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dpt/parallel/communicator.h"
#include "dpt/train/config.h"

namespace dpt::report {

using train::JobConfig;

struct JobHooks {
  // Applied, when set, to the MPI communicator of a multi-process job before training
  // uses it (tests wrap it to inject faults).
  std::function<std::shared_ptr<parallel::Communicator>(std::shared_ptr<parallel::Communicator>)> wrap_communicator;
  // Every message printed (errors, warnings, a stop) passes through it: the front end's
  // names for the backquoted config fields (the CLI: its flags). Empty: as is.
  std::function<std::string(const std::string&)> wording;
  // Whether a multi-process job compares its replicas after each epoch and stops when they
  // differ (RunOptions::check_replicas). Tests turn it off to see the accuracy a run whose
  // gradient allreduce is broken would report.
  bool check_replicas = true;
};

// Trains as `job` says. Returns the exit status: 0; 1 after an error, printed as
// "dptrain: error: ..."; 128 + N when stopped by signal N (SIGINT/SIGTERM: the step
// finished and a checkpoint written). In a multi-process job an error is printed as
// "dptrain: error: rank R of N (host): ..." and ends every rank (MPI_Abort); does not return.
int run_job(JobConfig job, const JobHooks& hooks = {});

// `dptrain checkpoint-info FILE`: verifies a checkpoint and prints what it holds. Returns
// the exit status as run_job does.
int show_checkpoint(const std::string& file, const JobHooks& hooks = {});

}  // namespace dpt::report
