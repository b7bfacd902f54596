#include "dpt/cuda/context.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dpt/cuda/runtime.h"

namespace dpt::cuda {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}
void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": " + cudnnGetErrorString(status));
}
void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(what) + ": " + cublasGetStatusString(status));
  }
}

bool sync_check_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("DPT_CUDA_SYNC_CHECK");
    return value != nullptr && std::string_view(value) == "1";
  }();
  return enabled;
}

void after_op(const char* what, cudaStream_t stream) {
  check(cudaGetLastError(), what);
  if (!sync_check_enabled()) return;
  const cudaError_t status = cudaStreamSynchronize(stream);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // the error is reported here; a sticky one stays sticky anyway
    throw std::runtime_error(std::string(what) + " (DPT_CUDA_SYNC_CHECK): " + cudaGetErrorString(status));
  }
}

void check_op(cudnnStatus_t status, const char* what, cudaStream_t stream) {
  check(status, what);
  after_op(what, stream);
}
void check_op(cublasStatus_t status, const char* what, cudaStream_t stream) {
  check(status, what);
  after_op(what, stream);
}

namespace {
// The device's one stream, created on first use and never destroyed (it outlives every
// tensor): every thread's context of the device queues on it.
cudaStream_t device_stream(int device) {
  static std::mutex mutex;
  static auto* const streams = new std::vector<cudaStream_t>(static_cast<size_t>(device_count()), nullptr);
  std::lock_guard lock(mutex);
  cudaStream_t& stream = (*streams)[static_cast<size_t>(device)];
  if (!stream) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  return stream;
}

Context* create_context(int device) {
  auto ctx = std::make_unique<Context>();
  ctx->device = device;
  ctx->stream = device_stream(device);
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudnnCreate(&ctx->cudnn), "cudnnCreate");
  check(cudnnSetStream(ctx->cudnn, ctx->stream), "cudnnSetStream");
  check(cublasCreate(&ctx->cublas), "cublasCreate");
  check(cublasSetStream(ctx->cublas, ctx->stream), "cublasSetStream");
  return ctx.release();
}

// Contexts no thread holds, per device, for the next thread that asks. Never destroyed:
// handles outlive every tensor, and a thread may end after static destructors have run.
struct FreeContexts {
  std::mutex mutex;
  std::vector<std::vector<Context*>> per_device;
};
FreeContexts& free_contexts() {
  static auto* const free = [] {
    auto* f = new FreeContexts;
    f->per_device.resize(static_cast<size_t>(device_count()));
    return f;
  }();
  return *free;
}

// This thread's contexts by device; handed back to free_contexts() when the thread ends.
struct ThreadContexts {
  std::vector<Context*> held;
  ~ThreadContexts() {
    FreeContexts& free = free_contexts();
    std::lock_guard lock(free.mutex);
    for (Context* ctx : held) {
      if (ctx) free.per_device[static_cast<size_t>(ctx->device)].push_back(ctx);
    }
  }
};
}  // namespace

Context& context(int device) {
  require_device(Device{Device::Kind::cuda, device});
  // One context per thread and device: cuDNN handles must not be used by two threads at
  // once, and two replicas on one GPU (cuda:0,cuda:0) are two worker threads on that GPU.
  // All of a device's contexts share its one stream, so everything queued on the GPU still
  // runs in one order (which the caching allocator relies on). A context is leased to a
  // thread for the thread's life and then reused, so handles are created only as often as
  // threads use a device at the same time.
  thread_local ThreadContexts mine;
  if (mine.held.empty()) mine.held.resize(static_cast<size_t>(device_count()), nullptr);
  Context*& ctx = mine.held[static_cast<size_t>(device)];
  if (!ctx) {
    FreeContexts& free = free_contexts();
    {
      std::lock_guard lock(free.mutex);
      auto& pool = free.per_device[static_cast<size_t>(device)];
      if (!pool.empty()) {
        ctx = pool.back();
        pool.pop_back();
      }
    }
    if (!ctx) ctx = create_context(device);
  }
  check(cudaSetDevice(device), "cudaSetDevice");
  return *ctx;
}

}  // namespace dpt::cuda
