// Tensor: a dense, contiguous, row-major array with a shape, a dtype and a device, whose
// storage is shared between views (reshape, detach) so that no op copies needlessly.
// A Tensor is a cheap handle; copying it aliases the same data, as in PyTorch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dpt/core/device.h"
#include "dpt/core/dtype.h"

namespace dpt {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& shape);  // "[256, 1, 28, 28]"
int64_t shape_numel(const Shape& shape);

// A memory layout other than plain row-major that a backend kernel chose for its output
// (oneDNN's nChw8c keeps channels in groups of 8 for SIMD). Activations stay in it from
// one kernel to the next; anything else that reads the data gets it converted first.
class BackendLayout {
 public:
  virtual ~BackendLayout() = default;
  // Writes the plain row-major form of `blocked` (laid out in this layout) to `plain`.
  virtual void to_plain(const void* blocked, void* plain) const = 0;
};

// Aligned host memory, or memory on one GPU, freed when the last tensor viewing it goes
// away. Every view of a storage (detach, reshape) sees the same layout, because the layout
// lives here.
class Storage {
 public:
  explicit Storage(size_t bytes, std::shared_ptr<const BackendLayout> layout = nullptr);
  // Memory on `device`: host memory for a cpu device, device memory for cuda:N.
  Storage(size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  // The bytes in plain row-major order (converted in place, once, if a backend layout held
  // them). Host memory only: on a GPU storage this throws std::logic_error.
  void* data(size_t plain_bytes);
  // The bytes as they are, in layout(): for backends that understand it.
  void* raw_data() const { return data_; }
  const BackendLayout* layout() const { return layout_.get(); }
  const std::shared_ptr<const BackendLayout>& shared_layout() const { return layout_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  std::shared_ptr<const BackendLayout> layout_;
};

namespace autograd {
struct Node;
}

// The state behind Tensor handles. Private: Tensor is the only way in, so that every
// folder above core goes through the few operations below.
class TensorImpl {
 private:
  friend class Tensor;
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_;
  bool requires_grad_ = false;               // a leaf whose .grad() backward fills
  std::shared_ptr<TensorImpl> grad_;         // accumulated gradient of a leaf
  std::shared_ptr<autograd::Node> grad_fn_;  // the op that produced this tensor, if recorded
  std::string name_;                         // optional, for error messages ("conv1.weight")
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Factories. Contents of empty() are uninitialised.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = {});
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = {});
  static Tensor full(const Shape& shape, float value, Device device = {});
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape, Device device = {});
  static Tensor from_labels(const std::vector<int64_t>& labels, Device device = {});
  // A tensor over `storage` as it is (a backend's output in its own layout, say).
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype, Device device);

  bool defined() const { return impl_ != nullptr; }
  // Whether both handles are the same tensor (not merely equal values).
  bool same_as(const Tensor& other) const { return impl_ == other.impl_; }
  const Shape& shape() const { return impl_->shape_; }
  int64_t dim(int i) const;  // size of axis i; negative i counts from the end
  int64_t numel() const { return shape_numel(impl_->shape_); }
  int ndim() const { return static_cast<int>(impl_->shape_.size()); }
  DType dtype() const { return impl_->dtype_; }
  Device device() const { return impl_->device_; }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }

  template <class T>
  T* data() const;     // checked against dtype; host tensors only (a GPU tensor throws)
  float item() const;  // the single value of a one-element f32 tensor
  std::vector<float> to_vector() const;

  // Autograd.
  bool requires_grad() const { return impl_->requires_grad_; }
  Tensor& set_requires_grad(bool value);
  bool needs_grad() const;  // requires grad itself or was computed from one that does
  Tensor grad() const;      // undefined until a backward() reached this tensor
  void zero_grad() const;   // drops the accumulated gradient
  // Sets the accumulated gradient (same shape; undefined drops it), as autograd and
  // the allreduce do.
  void set_grad(const Tensor& grad) const;
  // The gradient, a zero one first if there is none yet (so that every replica passes
  // the same buffer size to a collective).
  Tensor ensure_grad() const;
  // The recorded op that produced this tensor (null for a leaf or without recording).
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl_->grad_fn_; }
  void set_grad_fn(std::shared_ptr<autograd::Node> node) const;
  Tensor detach() const;  // same storage, no history
  // A view of the same storage with another shape of as many elements (no history).
  Tensor with_shape(const Shape& shape) const;
  const std::string& name() const { return impl_->name_; }
  Tensor& set_name(std::string name);

  // A new tensor with its own copy of the data (no history).
  Tensor clone() const;
  // Copies the values of `src` (same numel and dtype, any device) into this tensor's storage.
  void copy_from(const Tensor& src) const;
  // This tensor on `device`: itself when it is there already (every cpu:N is the same host
  // memory), else a copy (no history).
  Tensor to(Device device) const;

  // The bytes behind this tensor, shared by its views.
  Storage& storage() const { return *impl_->storage_; }
  // Moves this tensor in place onto the storage and device of `moved` (same shape and
  // dtype): every handle to it follows, as Module::to needs; the gradient is dropped.
  void adopt_storage(const Tensor& moved) const;

  // Identity: handles of one tensor share one impl (a key for maps of parameters).
  const TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

template <>
float* Tensor::data<float>() const;
template <>
int64_t* Tensor::data<int64_t>() const;

}  // namespace dpt
