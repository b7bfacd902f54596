// parallel::Communicator over NCCL for the GPUs of one process (one group of
// ncclCommInitRankConfig, as ncclCommInitAll but non-blocking): one
// communicator per GPU, each used by that GPU's worker thread, every collective queued on
// the GPU's stream after the kernels that produced its data.
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dpt/cuda/context.h"
#include "dpt/cuda/runtime.h"
#include "dpt/parallel/abortable_barrier.h"
#include "dpt/parallel/communicator.h"

namespace dpt::parallel {

namespace {
void check_nccl(ncclResult_t status, const char* what) {
  if (status != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(status));
}

ncclDataType_t nccl_type(DType type) {
  switch (type) {
    case DType::f32: return ncclFloat;
    case DType::i64: return ncclInt64;
    case DType::bf16: return ncclBfloat16;
  }
  throw std::invalid_argument("NCCL: unknown DType " + std::to_string(static_cast<int>(type)));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
  }
  throw std::invalid_argument("NCCL allreduce: unknown ReduceOp " + std::to_string(static_cast<int>(op)));
}

// Aborting without a use-after-free. abort() runs on a failing rank's thread while the
// other ranks' threads may be inside NCCL calls on their communicators, and ncclCommAbort
// frees the communicator it ends: a rank that checked `aborted_` and then entered
// ncclAllReduce would be using freed memory. So every NCCL call on a rank's communicator,
// and its ncclCommAbort, happen under that rank's lock (rank_mutex_), and a call made
// under the lock first checks `aborted_` (set before abort takes any lock).
//
// The lock may be held only across calls that return promptly, or abort() would wait
// for a rank that waits for the failed one. With blocking communicators that is not so:
// a collective's host call can wait for its peers (NCCL connects the ranks lazily, at the
// first collective of each kind). Hence non-blocking communicators (config.blocking = 0):
// every call returns at once, ncclSuccess or ncclInProgress, and the rank then polls
// ncclCommGetAsyncError until the call has completed, releasing its lock between polls
// and giving up with CollectiveAborted as soon as abort() has begun. The alternative, a
// lock held across a blocking enqueue, can deadlock exactly when a peer has failed.
class NcclCommunicator final : public Communicator {
 public:
  using Communicator::allreduce;
  using Communicator::broadcast;

  explicit NcclCommunicator(const std::vector<Device>& devices)
      : devices_(devices),
        comms_(devices.size(), nullptr),
        rank_mutex_(devices.size()),
        received_(devices.size()),
        barrier_(static_cast<int>(devices.size())) {
    for (const Device& d : devices) {
      cuda::require_device(d);
      cuda::context(d.index);  // streams and handles exist before NCCL starts
    }
    ncclUniqueId id;
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const int n = static_cast<int>(devices.size());
    // One thread initialises every rank, so the calls form one group (as ncclCommInitAll).
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (int rank = 0; rank < n; ++rank) {
      cuda::check(cudaSetDevice(devices[rank].index), "cudaSetDevice");
      const ncclResult_t status = ncclCommInitRankConfig(&comms_[rank], n, id, rank, &config);
      if (status != ncclSuccess && status != ncclInProgress) {
        (void)ncclGroupEnd();
        check_nccl(status, "ncclCommInitRankConfig");
      }
    }
    const ncclResult_t grouped = ncclGroupEnd();
    if (grouped != ncclSuccess && grouped != ncclInProgress) check_nccl(grouped, "ncclCommInitRankConfig (group)");
    for (int rank = 0; rank < n; ++rank) {
      ncclResult_t state = ncclInProgress;
      while (state == ncclInProgress) {
        check_nccl(ncclCommGetAsyncError(comms_[rank], &state), "ncclCommGetAsyncError");
        if (state == ncclInProgress) std::this_thread::yield();
      }
      check_nccl(state, "ncclCommInitRankConfig");
    }
  }
  ~NcclCommunicator() override {
    if (aborted_) return;  // ncclCommAbort freed them
    // Finalize every rank (non-blocking: each returns at once), wait until each is
    // quiescent, then free it. A communicator that does not settle within a minute (a
    // peer that never came) is aborted instead of hanging the destructor.
    for (ncclComm_t comm : comms_) (void)ncclCommFinalize(comm);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    for (ncclComm_t comm : comms_) {
      ncclResult_t state = ncclInProgress;
      while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
        if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) break;
        if (state == ncclInProgress) std::this_thread::yield();
      }
      if (state == ncclSuccess) {
        (void)ncclCommDestroy(comm);
      } else {
        (void)ncclCommAbort(comm);
      }
    }
  }

  int size() const override { return static_cast<int>(devices_.size()); }
  std::string name() const override { return "nccl"; }
  bool reduces_device_memory() const override { return true; }

  void allreduce(int rank, void* data, size_t count, DType type, ReduceOp op) override {
    const cuda::Context& ctx = cuda::context(devices_[rank].index);
    run(rank, "ncclAllReduce", [&](ncclComm_t comm) {
      return ncclAllReduce(data, data, count, nccl_type(type), nccl_op(op), comm, ctx.stream);
    });
    // NCCL's ring moves 2 (N-1)/N of the buffer into each rank; not measured, as NCCL
    // does not report it.
    received_[rank] += 2 * (devices_.size() - 1) * count * dtype_size(type) / devices_.size();
  }
  void broadcast(int rank, void* data, size_t count, DType type, int root) override {
    const cuda::Context& ctx = cuda::context(devices_[rank].index);
    run(rank, "ncclBroadcast",
        [&](ncclComm_t comm) { return ncclBroadcast(data, data, count, nccl_type(type), root, comm, ctx.stream); });
    if (rank != root) received_[rank] += count * dtype_size(type);
  }
  // ncclSend / ncclRecv to every peer in one group; the block to itself is a copy on the
  // rank's stream. (Not yet run: no GPU has been lent to this project.)
  void alltoall(int rank, const std::vector<Block>& send, const std::vector<Block>& receive, DType type) override {
    check_alltoall_blocks(send, receive, size(), rank);
    const cuda::Context& ctx = cuda::context(devices_[rank].index);
    const size_t element = dtype_size(type);
    if (send[rank].count > 0) {
      cuda::check(cudaMemcpyAsync(receive[rank].data, send[rank].data, send[rank].count * element,
                                  cudaMemcpyDeviceToDevice, ctx.stream),
                  "cudaMemcpyAsync (alltoall to itself)");
    }
    run(rank, "ncclSend/ncclRecv (alltoall)", [&](ncclComm_t comm) {
      ncclResult_t status = ncclGroupStart();
      for (int peer = 0; peer < size() && status == ncclSuccess; ++peer) {
        if (peer == rank) continue;
        if (send[peer].count > 0) {
          status = ncclSend(send[peer].data, send[peer].count, nccl_type(type), peer, comm, ctx.stream);
        }
        if (status == ncclSuccess && receive[peer].count > 0) {
          status = ncclRecv(receive[peer].data, receive[peer].count, nccl_type(type), peer, comm, ctx.stream);
        }
      }
      const ncclResult_t ended = ncclGroupEnd();
      return status != ncclSuccess ? status : ended;
    });
    for (int peer = 0; peer < size(); ++peer) {
      if (peer != rank) received_[rank] += receive[peer].count * element;
    }
  }
  void barrier(int) override { barrier_.arrive_and_wait(); }
  void abort(const std::string& reason) override {
    {
      std::lock_guard lock(mutex_);
      if (aborted_) return;
      reason_ = reason;
      aborted_ = true;
    }
    barrier_.abort(reason);
    // Ends NCCL kernels still waiting for a rank that will not come. Under each rank's
    // lock: no call of that rank is inside NCCL meanwhile, and none starts afterwards.
    for (size_t rank = 0; rank < comms_.size(); ++rank) {
      std::lock_guard lock(rank_mutex_[rank]);
      if (comms_[rank] != nullptr) (void)ncclCommAbort(comms_[rank]);
      comms_[rank] = nullptr;
    }
  }
  size_t bytes_received(int rank) const override { return received_[rank]; }

 private:
  [[noreturn]] void throw_aborted() {
    std::lock_guard lock(mutex_);
    throw CollectiveAborted("collective aborted: " + reason_);
  }

  // Makes one non-blocking NCCL call on rank's communicator and waits until it has been
  // queued on the rank's stream (see the class comment).
  template <class Call>
  void run(int rank, const char* what, const Call& call) {
    std::unique_lock lock(rank_mutex_[rank]);
    if (aborted_) throw_aborted();
    ncclResult_t state = call(comms_[rank]);
    while (state == ncclInProgress) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
      if (aborted_) {
        lock.unlock();
        throw_aborted();
      }
      check_nccl(ncclCommGetAsyncError(comms_[rank], &state), "ncclCommGetAsyncError");
    }
    if (state != ncclSuccess) {
      lock.unlock();
      if (aborted_) throw_aborted();
      check_nccl(state, what);
    }
  }

  std::vector<Device> devices_;
  std::vector<ncclComm_t> comms_;  // each under its rank_mutex_; null once aborted
  std::vector<std::mutex> rank_mutex_;
  std::vector<size_t> received_;
  AbortableBarrier barrier_;
  std::mutex mutex_;  // reason_
  std::atomic<bool> aborted_ = false;
  std::string reason_;
};
}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<Device>& devices) {
  return std::make_unique<NcclCommunicator>(devices);
}

}  // namespace dpt::parallel
