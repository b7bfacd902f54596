// parallel::Communicator over NCCL for the GPUs of one process (ncclCommInitAll): one
// communicator per GPU, each used by that GPU's worker thread, every collective queued on
// the GPU's stream after the kernels that produced its data.
#include <nccl.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
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

ncclDataType_t nccl_type(DType type) { return type == DType::f32 ? ncclFloat : ncclInt64; }

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  throw std::invalid_argument("NCCL allreduce: unknown ReduceOp " + std::to_string(static_cast<int>(op)));
}

class NcclCommunicator final : public Communicator {
 public:
  using Communicator::allreduce;
  using Communicator::broadcast;

  explicit NcclCommunicator(const std::vector<Device>& devices)
      : devices_(devices),
        comms_(devices.size()),
        received_(devices.size()),
        barrier_(static_cast<int>(devices.size())) {
    std::vector<int> indices;
    for (const Device& d : devices) {
      cuda::require_device(d);
      cuda::context(d.index);  // streams and handles exist before NCCL starts
      indices.push_back(d.index);
    }
    check_nccl(ncclCommInitAll(comms_.data(), static_cast<int>(indices.size()), indices.data()), "ncclCommInitAll");
  }
  ~NcclCommunicator() override {
    if (aborted_) return;  // ncclCommAbort freed them
    for (ncclComm_t comm : comms_) ncclCommDestroy(comm);
  }

  int size() const override { return static_cast<int>(devices_.size()); }
  std::string name() const override { return "nccl"; }
  bool reduces_device_memory() const override { return true; }

  void allreduce(int rank, void* data, size_t count, DType type, ReduceOp op) override {
    throw_if_aborted();
    const cuda::Context& ctx = cuda::context(devices_[rank].index);
    check_nccl(ncclAllReduce(data, data, count, nccl_type(type), nccl_op(op), comms_[rank], ctx.stream),
               "ncclAllReduce");
    // NCCL's ring moves 2 (N-1)/N of the buffer into each rank; not measured, as NCCL
    // does not report it.
    received_[rank] += 2 * (devices_.size() - 1) * count * dtype_size(type) / devices_.size();
  }
  void broadcast(int rank, void* data, size_t count, DType type, int root) override {
    throw_if_aborted();
    const cuda::Context& ctx = cuda::context(devices_[rank].index);
    check_nccl(ncclBroadcast(data, data, count, nccl_type(type), root, comms_[rank], ctx.stream), "ncclBroadcast");
    if (rank != root) received_[rank] += count * dtype_size(type);
  }
  void barrier(int) override { barrier_.arrive_and_wait(); }
  void abort(const std::string& reason) override {
    {
      std::lock_guard lock(mutex_);
      if (aborted_) return;
      aborted_ = true;
      reason_ = reason;
    }
    barrier_.abort(reason);
    // Ends NCCL kernels still waiting for a rank that will not come (NCCL allows this
    // from another thread while collectives are in flight).
    for (ncclComm_t comm : comms_) ncclCommAbort(comm);
  }
  size_t bytes_received(int rank) const override { return received_[rank]; }

 private:
  void throw_if_aborted() {
    std::lock_guard lock(mutex_);
    if (aborted_) throw CollectiveAborted("collective aborted: " + reason_);
  }

  std::vector<Device> devices_;
  std::vector<ncclComm_t> comms_;
  std::vector<size_t> received_;
  AbortableBarrier barrier_;
  std::mutex mutex_;
  bool aborted_ = false;
  std::string reason_;
};
}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<Device>& devices) {
  return std::make_unique<NcclCommunicator>(devices);
}

}  // namespace dpt::parallel
