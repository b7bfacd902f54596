// Multi-process data parallelism over MPI (OpenMPI, launched with mpirun): one process per
// device, each a rank of MPI_COMM_WORLD. The Communicator here moves gradients with MPI
// point-to-point messages, so the ring allreduce's wire volume is exactly its 2 (N-1)/N of
// the buffer per rank, and counted as it arrives (bytes_received).
//
// No collective waits forever: every wait polls nonblocking requests against a deadline
// (--collective-timeout) and throws CollectiveTimeout naming the rank it waited for; the
// caller then ends the whole job with MpiRuntime::abort_job (MPI_Abort), so a dead or
// stuck rank stops every rank with a message instead of a hang.
//
// This header does not include <mpi.h>: a build without MPI compiles the same callers, and
// MpiRuntime then throws a message saying how to get MPI.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "dpt/parallel/communicator.h"

namespace dpt::parallel {

// A collective that did not complete within its deadline (a peer died or hangs).
class CollectiveTimeout : public CollectiveAborted {
 public:
  using CollectiveAborted::CollectiveAborted;
};

// Whether this build has the MPI backend (CMake found MPI).
bool mpi_built_in();

// MPI for the lifetime of the object: MPI_Init_thread on construction (each rank's
// communication thread calls MPI while its compute thread runs), MPI_Finalize on
// destruction. One per process. Throws std::runtime_error in a build without MPI.
class MpiRuntime {
 public:
  MpiRuntime();
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::string host() const { return host_; }

  // A communicator over all ranks. `algorithm`: "ring" (reduce-scatter + all-gather between
  // ring neighbours) or "naive" (every rank sends its buffer to rank 0, which sums in rank
  // order and sends the sum back). `timeout_seconds` > 0 bounds every collective.
  std::shared_ptr<Communicator> communicator(const std::string& algorithm, double timeout_seconds) const;

  // Ends every rank of the job (MPI_Abort) with `exit_code`, after this rank has printed
  // why: the way one rank's error stops the others instead of leaving them waiting.
  [[noreturn]] static void abort_job(int exit_code);

 private:
  int rank_ = 0;
  int size_ = 1;
  std::string host_;
};

}  // namespace dpt::parallel
