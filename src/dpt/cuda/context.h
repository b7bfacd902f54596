// Per-GPU state for the CUDA backend: one stream per device, and per thread using it one
// cuDNN handle and one cuBLAS handle bound to that stream, so everything dptrain queues on
// a GPU runs in order.
// Includes the CUDA headers: only src/dpt/cuda and src/dpt/ops/cuda use it.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

namespace dpt::cuda {

// Each throws std::runtime_error "<what>: <the library's own message>" on failure.
void check(cudaError_t status, const char* what);
void check(cudnnStatus_t status, const char* what);
void check(cublasStatus_t status, const char* what);

// Whether DPT_CUDA_SYNC_CHECK=1 is set (read once): a debug mode in which after_op waits
// for the stream after every op, so that a kernel's fault is reported by the op that
// caused it rather than by a later copy.
bool sync_check_enabled();
// Checks the op `what` just queued on `stream` (a kernel launch, a cuDNN or cuBLAS call):
// throws std::runtime_error "<what>: <error>" when cudaGetLastError reports that the
// launch failed (a bad configuration, no kernel image for this GPU, an earlier fault);
// with sync_check_enabled() it then also synchronises the stream and reports what the op
// did when it ran ("<what> (DPT_CUDA_SYNC_CHECK): <error>").
void after_op(const char* what, cudaStream_t stream);
// check(status, what) then after_op(what, stream), for a cuDNN or cuBLAS call that queues
// work on `stream`.
void check_op(cudnnStatus_t status, const char* what, cudaStream_t stream);
void check_op(cublasStatus_t status, const char* what, cudaStream_t stream);

struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
};

// The calling thread's context of GPU `device`, created on first use, with `device` made
// current on the calling thread. Each thread has its own (cuDNN and cuBLAS handles serve
// one thread at a time), all of a device's contexts sharing the device's one stream, so
// two worker threads may drive one GPU (two replicas on cuda:0).
Context& context(int device);

}  // namespace dpt::cuda
