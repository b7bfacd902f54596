// The in-process backends: ranks are threads that publish a pointer to their buffer, then
// read each other's buffers between barriers. A barrier separates every step in which one
// rank reads what another wrote, so no step races with another.
#include <algorithm>
#include <cstring>
#include <vector>

#include "dpt/parallel/abortable_barrier.h"
#include "dpt/parallel/communicator.h"

namespace dpt::parallel {

namespace {

class InProcessCommunicator : public Communicator {
 public:
  explicit InProcessCommunicator(int size)
      : size_(size), barrier_(size), buffers_(size, nullptr), bytes_received_(size, 0) {}

  int size() const override { return size_; }

  void broadcast(int rank, float* data, size_t count, int root) override {
    publish(rank, data);
    if (rank != root) {
      std::memcpy(data, buffers_[root], count * sizeof(float));
      bytes_received_[rank] += count * sizeof(float);
    }
    barrier_.arrive_and_wait();  // root's buffer stays untouched until every rank has copied
  }

  void barrier(int /*rank*/) override { barrier_.arrive_and_wait(); }

  void abort(const std::string& reason) override { barrier_.abort(reason); }

  size_t bytes_received(int rank) const override { return bytes_received_[rank]; }

 protected:
  // Makes `data` visible to every rank; returns once all ranks have published theirs.
  void publish(int rank, float* data) {
    buffers_[rank] = data;
    barrier_.arrive_and_wait();
  }

  // dst[i] += src[i]: reading a peer's buffer, counted as received bytes.
  void add_from(int rank, float* dst, const float* src, size_t count) {
    for (size_t i = 0; i < count; ++i) dst[i] += src[i];
    bytes_received_[rank] += count * sizeof(float);
  }
  void copy_from(int rank, float* dst, const float* src, size_t count) {
    std::memcpy(dst, src, count * sizeof(float));
    bytes_received_[rank] += count * sizeof(float);
  }

  const int size_;
  AbortableBarrier barrier_;
  std::vector<float*> buffers_;
  std::vector<size_t> bytes_received_;  // each entry written only by its own rank
};

class NaiveCommunicator final : public InProcessCommunicator {
 public:
  using InProcessCommunicator::InProcessCommunicator;
  std::string name() const override { return "naive"; }

  void allreduce_sum(int rank, float* data, size_t count) override {
    publish(rank, data);
    if (rank == 0) {
      for (int peer = 1; peer < size_; ++peer) add_from(rank, data, buffers_[peer], count);
    }
    barrier_.arrive_and_wait();  // the sum is complete on rank 0
    if (rank != 0) copy_from(rank, data, buffers_[0], count);
    barrier_.arrive_and_wait();  // nobody reuses its buffer while another still reads it
  }
};

class RingCommunicator final : public InProcessCommunicator {
 public:
  using InProcessCommunicator::InProcessCommunicator;
  std::string name() const override { return "ring"; }

  void allreduce_sum(int rank, float* data, size_t count) override {
    const int n = size_;
    publish(rank, data);
    if (n > 1) {
      const float* left = buffers_[(rank - 1 + n) % n];
      // Reduce-scatter: in step s, take chunk (rank - 1 - s) from the left neighbour and add
      // it into ours. After n - 1 steps this rank holds the full sum of chunk rank + 1.
      for (int step = 0; step < n - 1; ++step) {
        const auto [begin, end] = chunk((rank - 1 - step + 2 * n) % n, count);
        add_from(rank, data + begin, left + begin, end - begin);
        barrier_.arrive_and_wait();
      }
      // All-gather: in step s, copy the finished chunk (rank - s) from the left neighbour.
      for (int step = 0; step < n - 1; ++step) {
        const auto [begin, end] = chunk((rank - step + n) % n, count);
        copy_from(rank, data + begin, left + begin, end - begin);
        barrier_.arrive_and_wait();
      }
    }
  }

 private:
  // Element range of chunk c when `count` elements are cut into size_ nearly equal parts.
  std::pair<size_t, size_t> chunk(int c, size_t count) const {
    const size_t n = static_cast<size_t>(size_);
    const size_t base = count / n, extra = count % n;
    const size_t index = static_cast<size_t>(c);
    const size_t begin = index * base + std::min(index, extra);
    return {begin, begin + base + (index < extra ? 1 : 0)};
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
