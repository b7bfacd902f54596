#include "dpt/core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "dpt/core/allocator.h"
#include "dpt/core/device_memory.h"

namespace dpt {

std::string shape_str(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return sizeof(float);
    case DType::i64: return sizeof(int64_t);
    case DType::bf16: return sizeof(uint16_t);
  }
  return 0;
}
const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "float32";
    case DType::i64: return "int64";
    case DType::bf16: return "bfloat16";
  }
  return "?";
}

namespace {
bool on_gpu(Device device) { return device.kind == Device::Kind::cuda; }
}  // namespace

Storage::Storage(size_t bytes, std::shared_ptr<const BackendLayout> layout)
    : data_(allocate_host(bytes)), bytes_(bytes), layout_(std::move(layout)) {}
Storage::Storage(size_t bytes, Device device)
    : data_(on_gpu(device) ? device_memory(device).allocate(device.index, bytes) : allocate_host(bytes)),
      bytes_(bytes),
      device_(device) {}
Storage::~Storage() {
  if (on_gpu(device_)) {
    device_memory(device_).release(device_.index, data_, bytes_);
  } else {
    release_host(data_, bytes_);
  }
}

void* Storage::data(size_t plain_bytes) {
  if (on_gpu(device_)) {
    throw std::logic_error("host access to a tensor on " + device_.str() +
                           ": copy it to the host first (Tensor::to(Device::cpu()))");
  }
  if (layout_) {
    void* plain = allocate_host(plain_bytes);
    layout_->to_plain(data_, plain);
    release_host(data_, bytes_);
    data_ = plain;
    bytes_ = plain_bytes;
    layout_.reset();
  }
  return data_;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("negative dimension in shape " + shape_str(shape));
  }
  return from_storage(std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype), device),
                      shape, dtype, device);
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage_ = std::move(storage);
  impl->shape_ = shape;
  impl->dtype_ = dtype;
  impl->device_ = device;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (on_gpu(device)) {
    device_memory(device).fill_zero(device.index, t.storage().raw_data(), t.bytes());
  } else {
    std::memset(t.storage().raw_data(), 0, t.bytes());
  }
  return t;
}

// The factories that take values fill a host tensor and copy it to a GPU.
Tensor Tensor::full(const Shape& shape, float value, Device device) {
  if (on_gpu(device)) return full(shape, value).to(device);
  Tensor t = empty(shape, DType::f32, device);
  float* p = t.data<float>();
  std::fill(p, p + t.numel(), value);
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape, Device device) {
  if (static_cast<int64_t>(values.size()) != shape_numel(shape)) {
    throw std::invalid_argument("from_vector: " + std::to_string(values.size()) + " values do not fill shape " +
                                shape_str(shape));
  }
  if (on_gpu(device)) return from_vector(values, shape).to(device);
  Tensor t = empty(shape, DType::f32, device);
  std::memcpy(t.data<float>(), values.data(), t.bytes());
  return t;
}

Tensor Tensor::from_labels(const std::vector<int64_t>& labels, Device device) {
  if (on_gpu(device)) return from_labels(labels).to(device);
  Tensor t = empty({static_cast<int64_t>(labels.size())}, DType::i64, device);
  std::memcpy(t.data<int64_t>(), labels.data(), t.bytes());
  return t;
}

int64_t Tensor::dim(int i) const {
  const int n = ndim();
  const int axis = i < 0 ? i + n : i;
  if (axis < 0 || axis >= n) {
    throw std::out_of_range("axis " + std::to_string(i) + " out of range for shape " + shape_str(shape()));
  }
  return impl_->shape_[axis];
}

template <>
float* Tensor::data<float>() const {
  if (dtype() != DType::f32)
    throw std::logic_error(std::string("data<float>() on a ") + dtype_name(dtype()) + " tensor");
  return static_cast<float*>(storage().data(bytes()));
}

template <>
int64_t* Tensor::data<int64_t>() const {
  if (dtype() != DType::i64)
    throw std::logic_error(std::string("data<int64_t>() on a ") + dtype_name(dtype()) + " tensor");
  return static_cast<int64_t*>(storage().data(bytes()));
}

float Tensor::item() const {
  if (numel() != 1) throw std::logic_error("item() on a tensor of shape " + shape_str(shape()));
  if (on_gpu(device())) return to(Device::cpu()).item();
  return data<float>()[0];
}

std::vector<float> Tensor::to_vector() const {
  if (on_gpu(device())) return to(Device::cpu()).to_vector();
  const float* p = data<float>();
  return std::vector<float>(p, p + numel());
}

Tensor& Tensor::set_requires_grad(bool value) {
  impl_->requires_grad_ = value;
  return *this;
}

bool Tensor::needs_grad() const { return impl_->requires_grad_ || impl_->grad_fn_ != nullptr; }

Tensor Tensor::grad() const { return Tensor(impl_->grad_); }

void Tensor::zero_grad() const { impl_->grad_.reset(); }

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined() && grad.shape() != shape()) {
    throw std::invalid_argument("set_grad: gradient " + shape_str(grad.shape()) + " for a tensor of shape " +
                                shape_str(shape()));
  }
  impl_->grad_ = grad.impl_;
}

Tensor Tensor::ensure_grad() const {
  if (!impl_->grad_) impl_->grad_ = zeros(shape(), DType::f32, device()).impl_;
  return grad();
}

void Tensor::set_grad_fn(std::shared_ptr<autograd::Node> node) const { impl_->grad_fn_ = std::move(node); }

Tensor Tensor::detach() const { return from_storage(impl_->storage_, shape(), dtype(), device()); }

Tensor Tensor::with_shape(const Shape& shape) const {
  if (shape_numel(shape) != numel()) {
    throw std::invalid_argument("with_shape: " + shape_str(shape) + " does not hold the " + std::to_string(numel()) +
                                " elements of " + shape_str(this->shape()));
  }
  return from_storage(impl_->storage_, shape, dtype(), device());
}

void Tensor::adopt_storage(const Tensor& moved) const {
  if (moved.shape() != shape() || moved.dtype() != dtype()) {
    throw std::invalid_argument("adopt_storage: " + shape_str(moved.shape()) + " for a tensor of shape " +
                                shape_str(shape()));
  }
  impl_->storage_ = moved.impl_->storage_;
  impl_->device_ = moved.device();
  impl_->grad_.reset();
}

Tensor& Tensor::set_name(std::string name) {
  impl_->name_ = std::move(name);
  return *this;
}

Tensor Tensor::clone() const {
  const Storage& source = storage();
  if (source.layout() != nullptr) {
    // A host tensor in a backend's layout is copied as it is, layout and all: the copy reads
    // as the source would, and neither is converted to plain (autograd clones a gradient
    // before it sums another into it, so a plain copy would cost two conversions per sum).
    auto copy = std::make_shared<Storage>(source.bytes(), source.shared_layout());
    std::memcpy(copy->raw_data(), source.raw_data(), source.bytes());
    return from_storage(std::move(copy), shape(), dtype(), device());
  }
  Tensor t = empty(shape(), dtype(), device());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == this->device() || (!on_gpu(device) && !on_gpu(this->device()))) return *this;
  Tensor t = empty(shape(), dtype(), device);
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) const {
  if (src.numel() != numel() || src.dtype() != dtype()) {
    throw std::invalid_argument("copy_from: source " + shape_str(src.shape()) + " " + dtype_name(src.dtype()) +
                                " does not match destination " + shape_str(shape()) + " " + dtype_name(dtype()));
  }
  const Device to = device(), from = src.device();
  Storage& dst_storage = storage();
  Storage& src_storage = src.storage();
  if (!on_gpu(to) && !on_gpu(from)) {
    std::memcpy(dst_storage.data(bytes()), src_storage.data(src.bytes()), bytes());
  } else if (!on_gpu(from)) {
    device_memory(to).copy_from_host(to.index, dst_storage.raw_data(), src_storage.data(src.bytes()), bytes());
  } else if (!on_gpu(to)) {
    device_memory(from).copy_to_host(from.index, dst_storage.data(bytes()), src_storage.raw_data(), bytes());
  } else if (to == from) {
    device_memory(to).copy_on_device(to.index, dst_storage.raw_data(), src_storage.raw_data(), bytes());
  } else {
    device_memory(to).copy_between_devices(to.index, dst_storage.raw_data(), from.index, src_storage.raw_data(), bytes());
  }
}

}  // namespace dpt
