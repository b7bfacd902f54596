// Small helpers of the CUDA backend: raw device pointers of tensors, and RAII cuDNN
// descriptors for NCHW float tensors, filters, convolutions and pooling windows.
#pragma once

#include <cudnn.h>

#include <cstdint>

#include "dpt/core/tensor.h"
#include "dpt/cuda/context.h"
#include "dpt/cuda/runtime.h"

namespace dpt::ops::cuda {

// The device address of a tensor on a GPU (its storage is never in a backend layout).
inline float* f32(const Tensor& t) { return static_cast<float*>(t.storage().raw_data()); }
inline int64_t* i64(const Tensor& t) { return static_cast<int64_t*>(t.storage().raw_data()); }
// The context of the GPU the tensor is on (current on this thread from now on).
inline dpt::cuda::Context& context_of(const Tensor& t) { return dpt::cuda::context(t.device().index); }

class TensorDesc {
 public:
  // An NCHW float tensor; shapes of rank < 4 are read as [N, C, 1, 1].
  explicit TensorDesc(const Shape& shape) {
    dpt::cuda::check(cudnnCreateTensorDescriptor(&desc_), "cudnnCreateTensorDescriptor");
    const auto dim = [&](size_t i) { return i < shape.size() ? static_cast<int>(shape[i]) : 1; };
    dpt::cuda::check(
        cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, dim(0), dim(1), dim(2), dim(3)),
        "cudnnSetTensor4dDescriptor");
  }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(desc_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  operator cudnnTensorDescriptor_t() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class FilterDesc {
 public:
  explicit FilterDesc(const Shape& oihw) {
    dpt::cuda::check(cudnnCreateFilterDescriptor(&desc_), "cudnnCreateFilterDescriptor");
    dpt::cuda::check(
        cudnnSetFilter4dDescriptor(desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(oihw[0]),
                                   static_cast<int>(oihw[1]), static_cast<int>(oihw[2]), static_cast<int>(oihw[3])),
        "cudnnSetFilter4dDescriptor");
  }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(desc_); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  operator cudnnFilterDescriptor_t() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

// Device scratch memory for one call, returned to the device's cache afterwards (safe at
// once: the stream runs the call before any later user of the block).
class Workspace {
 public:
  Workspace(int device, size_t bytes) : device_(device), bytes_(bytes) {
    if (bytes_) data_ = dpt::cuda::allocate(device_, bytes_);
  }
  ~Workspace() {
    if (data_) dpt::cuda::release(device_, data_, bytes_);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  int device_;
  size_t bytes_;
  void* data_ = nullptr;
};

}  // namespace dpt::ops::cuda
