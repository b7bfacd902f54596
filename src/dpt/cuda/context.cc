#include "dpt/cuda/context.h"

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
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

namespace {
std::unique_ptr<Context> create_context(int device) {
  auto ctx = std::make_unique<Context>();
  ctx->device = device;
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudnnCreate(&ctx->cudnn), "cudnnCreate");
  check(cudnnSetStream(ctx->cudnn, ctx->stream), "cudnnSetStream");
  check(cublasCreate(&ctx->cublas), "cublasCreate");
  check(cublasSetStream(ctx->cublas, ctx->stream), "cublasSetStream");
  return ctx;
}
}  // namespace

Context& context(int device) {
  require_device(Device{Device::Kind::cuda, device});
  // Contexts live until the process ends: streams and handles outlive every tensor.
  static std::mutex mutex;
  static std::vector<std::unique_ptr<Context>> contexts(static_cast<size_t>(device_count()));
  Context* ctx;
  {
    std::lock_guard lock(mutex);
    auto& slot = contexts[static_cast<size_t>(device)];
    if (!slot) slot = create_context(device);
    ctx = slot.get();
  }
  check(cudaSetDevice(device), "cudaSetDevice");
  return *ctx;
}

}  // namespace dpt::cuda
