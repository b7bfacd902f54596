// The MPI backend. Collectives are built from nonblocking point-to-point messages
// (MPI_Isend / MPI_Irecv) rather than MPI_Allreduce, for two reasons: the ring's traffic is
// then exactly the algorithm's and can be counted as it arrives, and every wait can poll
// against a deadline, where a blocking MPI call would wait for a dead peer forever. The
// ring does the same additions in the same order as the in-process ring, so N processes
// compute bit for bit what one process on N devices computes.
#include "dpt/parallel/mpi_communicator.h"
#include "dpt/core/config_error.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dpt/parallel/ring_schedule.h"

namespace dpt::parallel {

namespace {

using Clock = std::chrono::steady_clock;

int mpi_count(size_t count) {
  if (count > static_cast<size_t>(INT_MAX)) {
    throw std::invalid_argument("MPI message of " + std::to_string(count) + " elements exceeds INT_MAX");
  }
  return static_cast<int>(count);
}

MPI_Datatype mpi_type(DType type) {
  switch (type) {
    case DType::f32: return MPI_FLOAT;
    case DType::i64: return MPI_INT64_T;
    case DType::bf16: return MPI_UINT16_T;  // moved, never reduced by MPI
  }
  throw std::invalid_argument("MPI: unknown DType " + std::to_string(static_cast<int>(type)));
}

class MpiCommunicator final : public Communicator {
 public:
  using Communicator::allreduce;
  using Communicator::broadcast;

  MpiCommunicator(const std::string& algorithm, double timeout_seconds)
      : algorithm_(algorithm),
        timeout_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds))) {
    if (algorithm != "ring" && algorithm != "naive") {
      throw std::invalid_argument("unknown allreduce algorithm '" + algorithm + "': expected naive or ring");
    }
    if (!(timeout_seconds > 0)) {
      throw ConfigError("collective_timeout",
                        "`collective_timeout` must be > 0 seconds, got " + std::to_string(timeout_seconds));
    }
    // Our own communicator: our messages can never match another library's.
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  int size() const override { return size_; }
  std::string name() const override { return "mpi " + algorithm_; }

  void allreduce(int rank, void* data, size_t count, DType type, ReduceOp op) override {
    check_rank(rank);
    std::lock_guard lock(mutex_);
    throw_if_aborted();
    if (size_ == 1) return;
    if (algorithm_ == "ring") {
      ring_allreduce(static_cast<std::byte*>(data), count, type, op);
    } else {
      naive_allreduce(static_cast<std::byte*>(data), count, type, op);
    }
  }

  void broadcast(int rank, void* data, size_t count, DType type, int root) override {
    check_rank(rank);
    std::lock_guard lock(mutex_);
    throw_if_aborted();
    if (size_ == 1) return;
    if (rank_ == root) {
      std::vector<MPI_Request> sends(static_cast<size_t>(size_ - 1));
      size_t i = 0;
      for (int peer = 0; peer < size_; ++peer) {
        if (peer != root) MPI_Isend(data, mpi_count(count), mpi_type(type), peer, kBroadcastTag, comm_, &sends[i++]);
      }
      wait_all(sends, "broadcast", -1, 0);
    } else {
      std::vector<MPI_Request> recv(1);
      MPI_Irecv(data, mpi_count(count), mpi_type(type), root, kBroadcastTag, comm_, &recv[0]);
      wait_all(recv, "broadcast", root, 1);
    }
  }

  void alltoall(int rank, const std::vector<Block>& send, const std::vector<Block>& receive, DType type) override {
    check_rank(rank);
    check_alltoall_blocks(send, receive, size_, rank_);
    std::lock_guard lock(mutex_);
    throw_if_aborted();
    // A rank's own block may be empty (no chunk of a short last batch), with null pointers,
    // which memcpy may not be given even for 0 bytes.
    if (send[rank_].count > 0) std::memcpy(receive[rank_].data, send[rank_].data, send[rank_].count * dtype_size(type));
    // Receives first: wait_all counts the bytes of the first `receives` requests. Empty
    // blocks send no message (both ends know the counts).
    std::vector<MPI_Request> requests;
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_ || receive[peer].count == 0) continue;
      requests.emplace_back();
      MPI_Irecv(receive[peer].data, mpi_count(receive[peer].count), mpi_type(type), peer, kAlltoallTag, comm_,
                &requests.back());
    }
    const size_t receives = requests.size();
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_ || send[peer].count == 0) continue;
      requests.emplace_back();
      MPI_Isend(send[peer].data, mpi_count(send[peer].count), mpi_type(type), peer, kAlltoallTag, comm_,
                &requests.back());
    }
    wait_all(requests, "alltoall", -1, receives);
  }

  void barrier(int rank) override {
    check_rank(rank);
    std::lock_guard lock(mutex_);
    throw_if_aborted();
    std::vector<MPI_Request> request(1);
    MPI_Ibarrier(comm_, &request[0]);
    wait_all(request, "barrier", -1, 0);
  }

  void abort(const std::string& reason) override {
    {
      std::lock_guard lock(reason_mutex_);
      if (reason_.empty()) reason_ = reason;
    }
    aborted_.store(true);
  }

  size_t bytes_received(int rank) const override {
    check_rank(rank);
    return bytes_received_.load();
  }

 private:
  static constexpr int kRingTag = 1;
  static constexpr int kNaiveTag = 2;
  static constexpr int kBroadcastTag = 3;
  static constexpr int kAlltoallTag = 4;
  static constexpr Clock::duration kBusyPoll = std::chrono::milliseconds(5);

  // ring_schedule.h's schedule (the in-process ring's): each step sends one chunk to the
  // right neighbour and receives one from the left.
  void ring_allreduce(std::byte* data, size_t count, DType type, ReduceOp op) {
    const int n = size_, left = (rank_ - 1 + n) % n, right = (rank_ + 1) % n;
    const size_t element = dtype_size(type);
    const MPI_Datatype mpi = mpi_type(type);
    scratch_.resize(ring::chunk(0, count, n).size() * element);  // chunk 0 is a largest one
    std::vector<MPI_Request> requests(2);
    for (int step = 0; step < n - 1; ++step) {
      const ring::Step s = ring::reduce_scatter_step(rank_, step, n, count);
      MPI_Irecv(scratch_.data(), mpi_count(s.receive.size()), mpi, left, kRingTag, comm_, &requests[0]);
      MPI_Isend(data + s.send.begin * element, mpi_count(s.send.size()), mpi, right, kRingTag, comm_, &requests[1]);
      wait_all(requests, "allreduce (ring reduce-scatter)", left, 1);
      reduce_into(data + s.receive.begin * element, scratch_.data(), s.receive.size(), type, op);
    }
    for (int step = 0; step < n - 1; ++step) {
      const ring::Step s = ring::all_gather_step(rank_, step, n, count);
      MPI_Irecv(data + s.receive.begin * element, mpi_count(s.receive.size()), mpi, left, kRingTag, comm_,
                &requests[0]);
      MPI_Isend(data + s.send.begin * element, mpi_count(s.send.size()), mpi, right, kRingTag, comm_, &requests[1]);
      wait_all(requests, "allreduce (ring all-gather)", left, 1);
    }
  }

  // The lesson's: rank 0 reduces every rank's buffer into its own in rank order, then sends
  // the result to everyone (as the in-process naive backend, so the sums agree bit for bit).
  void naive_allreduce(std::byte* data, size_t count, DType type, ReduceOp op) {
    const MPI_Datatype mpi = mpi_type(type);
    std::vector<MPI_Request> request(1);
    if (rank_ == 0) {
      scratch_.resize(count * dtype_size(type));
      for (int peer = 1; peer < size_; ++peer) {
        MPI_Irecv(scratch_.data(), mpi_count(count), mpi, peer, kNaiveTag, comm_, &request[0]);
        wait_all(request, "allreduce (naive gather)", peer, 1);
        reduce_into(data, scratch_.data(), count, type, op);
      }
      std::vector<MPI_Request> sends(static_cast<size_t>(size_ - 1));
      for (int peer = 1; peer < size_; ++peer) {
        MPI_Isend(data, mpi_count(count), mpi, peer, kNaiveTag, comm_, &sends[peer - 1]);
      }
      wait_all(sends, "allreduce (naive scatter)", -1, 0);
    } else {
      MPI_Isend(data, mpi_count(count), mpi, 0, kNaiveTag, comm_, &request[0]);
      wait_all(request, "allreduce (naive gather)", 0, 0);
      MPI_Irecv(data, mpi_count(count), mpi, 0, kNaiveTag, comm_, &request[0]);
      wait_all(request, "allreduce (naive scatter)", 0, 1);
    }
  }

  // Polls `requests` until all completed, counting the bytes received; throws
  // CollectiveTimeout at the deadline. `peer`: the rank waited for, named in the timeout
  // message (-1: several). The first `receives` requests are receives, whose bytes count.
  void wait_all(std::vector<MPI_Request>& requests, const char* what, int peer, size_t receives) {
    const Clock::time_point start = Clock::now(), deadline = start + timeout_;
    std::vector<MPI_Status> statuses(requests.size());
    for (;;) {
      int done = 0;
      MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, statuses.data());
      if (done) break;
      throw_if_aborted();
      if (Clock::now() > deadline) {
        const double seconds = std::chrono::duration<double>(timeout_).count();
        throw CollectiveTimeout("MPI " + std::string(what) + " on rank " + std::to_string(rank_) + " of " +
                                std::to_string(size_) + " timed out after " + format_seconds(seconds) +
                                " s waiting for " +
                                (peer >= 0 ? "rank " + std::to_string(peer) : std::string("the other ranks")) +
                                ", which has died or hangs (`collective_timeout` sets the limit)");
      }
      // A large message moves only while both ends poll (shared-memory fragments), so the
      // first milliseconds poll flat out, yielding to this process's compute thread; a wait
      // that lasts longer is for a slower peer and sleeps between polls.
      if (Clock::now() - start < kBusyPoll) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    // What actually arrived, as MPI reports it (a send's status carries no count).
    for (size_t i = 0; i < receives; ++i) {
      int bytes = 0;
      if (MPI_Get_count(&statuses[i], MPI_BYTE, &bytes) == MPI_SUCCESS && bytes > 0) {
        bytes_received_.fetch_add(static_cast<size_t>(bytes));
      }
    }
  }

  static std::string format_seconds(double seconds) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", seconds);
    return text;
  }

  void check_rank(int rank) const {
    if (rank != rank_) {
      throw std::invalid_argument("MPI communicator of rank " + std::to_string(rank_) + " called as rank " +
                                  std::to_string(rank));
    }
  }

  void throw_if_aborted() const {
    if (!aborted_.load()) return;
    std::lock_guard lock(reason_mutex_);
    throw CollectiveAborted("collective aborted: " + reason_);
  }

  const std::string algorithm_;
  const Clock::duration timeout_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::mutex mutex_;  // one collective at a time per process, whichever thread calls
  std::vector<std::byte> scratch_;  // a peer's chunk (ring) or buffer (naive), before reducing it in
  std::atomic<size_t> bytes_received_{0};
  std::atomic<bool> aborted_{false};
  mutable std::mutex reason_mutex_;
  std::string reason_;
};

}  // namespace

bool mpi_built_in() { return true; }

MpiRuntime::MpiRuntime() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) throw std::logic_error("MpiRuntime: MPI is already initialised in this process");
  int provided = 0;
  // Buckets are allreduced on a communication thread while the compute thread runs
  // backward; the communicator's mutex keeps the calls one at a time.
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    throw std::runtime_error("this MPI library cannot be called from several threads (MPI_THREAD_SERIALIZED)");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  host_.assign(name, static_cast<size_t>(length));
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::shared_ptr<Communicator> MpiRuntime::communicator(const std::string& algorithm, double timeout_seconds) const {
  return std::make_shared<MpiCommunicator>(algorithm, timeout_seconds);
}

void MpiRuntime::abort_job(int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; in case it does
}

}  // namespace dpt::parallel
