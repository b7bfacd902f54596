// The in-process backends: ranks are threads that publish a pointer to their buffer, then
// read each other's buffers between barriers. A barrier separates every step in which one
// rank reads what another wrote, so no step races with another.
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "dpt/parallel/abortable_barrier.h"
#include "dpt/parallel/communicator.h"
#include "dpt/parallel/ring_schedule.h"

namespace dpt::parallel {

namespace {

class InProcessCommunicator : public Communicator {
 public:
  using Communicator::allreduce;
  using Communicator::broadcast;

  explicit InProcessCommunicator(int size)
      : size_(size), barrier_(size), buffers_(size, nullptr), sends_(size, nullptr), alltoall_errors_(size), bytes_received_(size, 0) {}

  int size() const override { return size_; }

  void broadcast(int rank, void* data, size_t count, DType type, int root) override {
    publish(rank, data);
    if (rank != root) copy_from(rank, as_bytes(data), buffers_[root], count * dtype_size(type));
    barrier_.arrive_and_wait();  // root's buffer stays untouched until every rank has copied
  }

  // Each rank copies its blocks out of the peers' published send lists. A count that
  // disagrees is reported only after the last barrier, by every rank at once: a rank that
  // threw earlier would free its send blocks while a peer still copied from them.
  void alltoall(int rank, const std::vector<Block>& send, const std::vector<Block>& receive, DType type) override {
    try {
      check_alltoall_blocks(send, receive, size_, rank);
    } catch (const std::invalid_argument& e) {
      barrier_.abort(e.what());  // nobody has published yet: the peers wait in the first barrier
      throw;
    }
    sends_[rank] = &send;
    barrier_.arrive_and_wait();
    const size_t element = dtype_size(type);
    for (int peer = 0; peer < size_; ++peer) {
      const Block& from = (*sends_[peer])[rank];
      if (from.count != receive[peer].count) {
        if (alltoall_errors_[rank].empty()) {
          alltoall_errors_[rank] = "alltoall: rank " + std::to_string(peer) + " sends " +
                                   std::to_string(from.count) + " elements to rank " + std::to_string(rank) +
                                   ", which expects " + std::to_string(receive[peer].count);
        }
        continue;
      }
      if (from.count == 0) continue;
      if (peer == rank) {
        std::memcpy(receive[peer].data, from.data, from.count * element);
      } else {
        copy_from(rank, as_bytes(receive[peer].data), as_bytes(from.data), from.count * element);
      }
    }
    barrier_.arrive_and_wait();  // no rank's send blocks are released while another reads them
    throw_first_alltoall_error(rank);
  }

  void barrier(int /*rank*/) override { barrier_.arrive_and_wait(); }

  void abort(const std::string& reason) override { barrier_.abort(reason); }

  size_t bytes_received(int rank) const override { return bytes_received_[rank]; }

 protected:
  static std::byte* as_bytes(void* data) { return static_cast<std::byte*>(data); }

  // Every rank throws the lowest rank's error, so all of them report the same message.
  void throw_first_alltoall_error(int rank) {
    std::string first;
    for (const std::string& error : alltoall_errors_) {
      if (!error.empty()) {
        first = error;
        break;
      }
    }
    if (first.empty()) return;
    barrier_.arrive_and_wait();  // every rank has read the errors before any is cleared
    alltoall_errors_[rank].clear();
    throw std::invalid_argument(first);
  }

  // Makes `data` visible to every rank; returns once all ranks have published theirs.
  void publish(int rank, void* data) {
    buffers_[rank] = as_bytes(data);
    barrier_.arrive_and_wait();
  }

  // dst = op(dst, src) over `count` elements of a peer's buffer, counted as received bytes.
  void reduce_from(int rank, std::byte* dst, const std::byte* src, size_t count, DType type, ReduceOp op) {
    reduce_into(dst, src, count, type, op);
    bytes_received_[rank] += count * dtype_size(type);
  }
  void copy_from(int rank, std::byte* dst, const std::byte* src, size_t bytes) {
    std::memcpy(dst, src, bytes);
    bytes_received_[rank] += bytes;
  }

  const int size_;
  AbortableBarrier barrier_;
  std::vector<std::byte*> buffers_;
  std::vector<const std::vector<Block>*> sends_;  // alltoall's published send blocks
  std::vector<std::string> alltoall_errors_;     // each entry written only by its own rank
  std::vector<size_t> bytes_received_;  // each entry written only by its own rank
};

class NaiveCommunicator final : public InProcessCommunicator {
 public:
  using InProcessCommunicator::InProcessCommunicator;
  std::string name() const override { return "naive"; }

  // Rank 0 reduces every peer's buffer into its own in rank order, then every rank copies.
  void allreduce(int rank, void* data, size_t count, DType type, ReduceOp op) override {
    publish(rank, data);
    if (rank == 0) {
      for (int peer = 1; peer < size_; ++peer) reduce_from(rank, as_bytes(data), buffers_[peer], count, type, op);
    }
    barrier_.arrive_and_wait();  // the reduction is complete on rank 0
    if (rank != 0) copy_from(rank, as_bytes(data), buffers_[0], count * dtype_size(type));
    barrier_.arrive_and_wait();  // nobody reuses its buffer while another still reads it
  }
};

class RingCommunicator final : public InProcessCommunicator {
 public:
  using InProcessCommunicator::InProcessCommunicator;
  std::string name() const override { return "ring"; }

  // ring_schedule.h's schedule; each step reads the left neighbour's buffer directly, so a
  // step's "send" is the neighbour's "receive" and only receive ranges appear here.
  void allreduce(int rank, void* data, size_t count, DType type, ReduceOp op) override {
    const int n = size_;
    publish(rank, data);
    if (n == 1) return;
    const size_t element = dtype_size(type);
    std::byte* mine = as_bytes(data);
    const std::byte* left = buffers_[(rank - 1 + n) % n];
    for (int step = 0; step < n - 1; ++step) {
      const ring::Range in = ring::reduce_scatter_step(rank, step, n, count).receive;
      reduce_from(rank, mine + in.begin * element, left + in.begin * element, in.size(), type, op);
      barrier_.arrive_and_wait();
    }
    for (int step = 0; step < n - 1; ++step) {
      const ring::Range in = ring::all_gather_step(rank, step, n, count).receive;
      copy_from(rank, mine + in.begin * element, left + in.begin * element, in.size() * element);
      barrier_.arrive_and_wait();
    }
  }
};

}  // namespace

std::unique_ptr<Communicator> make_in_process_communicator(std::string_view algorithm, int size) {
  if (size < 1) throw std::invalid_argument("communicator needs at least one rank, got " + std::to_string(size));
  if (algorithm == "naive") return std::make_unique<NaiveCommunicator>(size);
  if (algorithm == "ring") return std::make_unique<RingCommunicator>(size);
  throw std::invalid_argument("unknown allreduce algorithm '" + std::string(algorithm) + "': expected naive or ring");
}

}  // namespace dpt::parallel
