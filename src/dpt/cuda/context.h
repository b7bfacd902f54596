// Per-GPU state for the CUDA backend: one stream, one cuDNN handle and one cuBLAS handle
// per device, bound to that stream, so everything dptrain queues on a GPU runs in order.
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

struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
};

// The context of GPU `device`, created on first use, with `device` made current on the
// calling thread. A context is used by one thread at a time (the device's worker), as the
// cuDNN and cuBLAS handles require.
Context& context(int device);

}  // namespace dpt::cuda
