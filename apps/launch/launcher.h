// `dptrain launch`: runs a training job under Open MPI's mpirun on the hosts of a hostfile
// and keeps it going without a person. On a failure (a rank that exits or dies, a
// collective that times out, a partition, a hung rank) it ends the run on every host,
// probes the hosts the way mpirun reaches them, and restarts on those that answer, from the
// newest checkpoint (--resume, N to M processes: the global batch stays, the shards change).
// Hosts that answer again, or are added to the hostfile, are taken back in: the job is
// stopped after its step (it checkpoints) and restarted on more processes.
#pragma once

#include <string>
#include <vector>

#include "dpt/train/config.h"
#include "launch/hostfile.h"

namespace dpt::cli::launch {

struct LaunchSettings {
  std::string hostfile;
  int min_hosts = 1;           // fewer answering hosts than this: give up
  int max_restarts = 3;        // restarts after failures (growing is not counted)
  double probe_timeout = 10;   // seconds a host has to answer a probe
  double readmit_every = 10;   // seconds between probes of the hosts left out (0: never take one back)
  double error_grace = 5;      // seconds mpirun has to end by itself after a rank reported an error
  std::string mpirun = "mpirun";
  std::string program;                   // the dptrain the hosts run (empty: this one's path)
  std::vector<std::string> mpirun_args;  // before the program, for every mpirun (probes too)
  std::vector<std::string> train_args;   // dptrain train's flags
};

// The train flags every rank gets: `train_args`, with --dist mpi unless they name --dist.
std::vector<std::string> rank_train_flags(const std::vector<std::string>& train_args);

// Refuses what cannot run (std::runtime_error): no --checkpoint-dir among the train flags,
// --dist other than mpi, a bad number.
void check(const LaunchSettings& settings, const train::JobConfig& job);

// Runs the job to its end: 0 when it finished, 128 + N after signal N reached the launcher
// (passed on: the job checkpoints first); throws std::runtime_error naming the cause when it
// gives up (too few hosts, too many restarts).
int launch(const LaunchSettings& settings, const train::JobConfig& job);

}  // namespace dpt::cli::launch
