// Test-only fault injection: a Communicator that forwards every call to the one it wraps
// and, on a configured rank's K-th allreduce (1-based, counted per rank over every
// allreduce: gradients, step figures, stop votes), fails the way a test asks:
//   exit:    std::_Exit(3) at once, without MPI_Finalize (a crashed process);
//   hang:    sleeps forever (a stuck one);
//   throw:   std::runtime_error "injected error (DPT_TEST_MPI_FAULT) in allreduce K" (an
//            error on one rank, as a bad input would raise);
//   sigint, sigterm: raises the signal in this process (as if the user or a scheduler
//            sent it), then goes on with the collective normally;
//   stop:    raises SIGSTOP (a hung process, as `kill -STOP` leaves it).
// With $DPT_TEST_MPI_FAULT_ONCE=DIR each fault fires once over every run that shares DIR
// (a marker file DIR/fault-R-K-MODE, made as it fires): a restarted job (dptrain launch)
// then runs past the fault that ended the run before it.
// Before acting it prints "dptrain: rank R: DPT_TEST_MPI_FAULT: <what> in allreduce K at
// unix time T (a test of fault handling)" to stderr: tests/mpi/dptrain_mpi_fault.sh greps
// it, and measures from T how long the other ranks took to stop.
//
// The library knows nothing of this: a test program installs it (tests/mpi/
// dptrain_with_faults.cc wraps dptrain's communicator with it; unit tests wrap an
// in-process one).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "dpt/parallel/communicator.h"
#include "forwarding_communicator.h"

namespace dpt::testing_support {

enum class FaultMode { exit, hang, throw_error, sigint, sigterm, stop };

struct Fault {
  int rank = -1;
  long call = 0;  // 1-based: the K-th allreduce of that rank
  FaultMode mode = FaultMode::throw_error;
  std::string marker;  // made as the fault fires; empty: none (it fires in every run)
};

// "R:K:MODE[,R:K:MODE...]", MODE one of exit, hang, throw, sigint, sigterm (e.g.
// "1:5:sigint,2:5:sigterm"); "" gives no faults. Throws std::invalid_argument naming the
// expected form for anything else.
std::vector<Fault> parse_fault_spec(const std::string& spec);

// parse_fault_spec of $DPT_TEST_MPI_FAULT (no faults when it is unset), less those that
// fired already in a run sharing $DPT_TEST_MPI_FAULT_ONCE.
std::vector<Fault> fault_spec_from_env();

class FaultInjectingCommunicator final : public ForwardingCommunicator {
 public:
  using Communicator::allreduce;

  FaultInjectingCommunicator(std::shared_ptr<parallel::Communicator> inner, std::vector<Fault> faults);

  void allreduce(int rank, void* data, size_t count, DType type, parallel::ReduceOp op) override;

 private:
  void inject_if_due(int rank);

  std::vector<Fault> faults_;
  // Allreduces entered per rank (an MPI rank may call from its compute and its
  // communication thread, hence atomic).
  std::vector<std::atomic<long>> calls_;
};

}  // namespace dpt::testing_support
