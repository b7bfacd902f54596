#include "dpt/core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "dpt/autograd/engine.h"
#include "dpt/core/allocator.h"

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

size_t dtype_size(DType dtype) { return dtype == DType::f32 ? sizeof(float) : sizeof(int64_t); }
const char* dtype_name(DType dtype) { return dtype == DType::f32 ? "float32" : "int64"; }

Storage::Storage(size_t bytes, std::shared_ptr<const BackendLayout> layout)
    : data_(allocate_host(bytes)), bytes_(bytes), layout_(std::move(layout)) {}
Storage::~Storage() { release_host(data_, bytes_); }

void* Storage::data(size_t plain_bytes) {
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
  if (device.kind != Device::Kind::cpu) {
    throw std::invalid_argument("tensor on " + device.str() + ": this build has no CUDA backend");
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype));
  impl->shape = shape;
  impl->dtype = dtype;
  impl->device = device;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  std::memset(t.impl_->storage->raw_data(), 0, t.bytes());
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, Device device) {
  Tensor t = empty(shape, DType::f32, device);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = value;
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape, Device device) {
  if (static_cast<int64_t>(values.size()) != shape_numel(shape)) {
    throw std::invalid_argument("from_vector: " + std::to_string(values.size()) + " values do not fill shape " +
                                shape_str(shape));
  }
  Tensor t = empty(shape, DType::f32, device);
  std::memcpy(t.data<float>(), values.data(), t.bytes());
  return t;
}

Tensor Tensor::from_labels(const std::vector<int64_t>& labels, Device device) {
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
  return impl_->shape[axis];
}

template <>
float* Tensor::data<float>() const {
  if (dtype() != DType::f32)
    throw std::logic_error(std::string("data<float>() on a ") + dtype_name(dtype()) + " tensor");
  return static_cast<float*>(impl_->storage->data(bytes()));
}

template <>
int64_t* Tensor::data<int64_t>() const {
  if (dtype() != DType::i64)
    throw std::logic_error(std::string("data<int64_t>() on a ") + dtype_name(dtype()) + " tensor");
  return static_cast<int64_t*>(impl_->storage->data(bytes()));
}

float Tensor::item() const {
  if (numel() != 1) throw std::logic_error("item() on a tensor of shape " + shape_str(shape()));
  return data<float>()[0];
}

std::vector<float> Tensor::to_vector() const {
  const float* p = data<float>();
  return std::vector<float>(p, p + numel());
}

Tensor& Tensor::set_requires_grad(bool value) {
  impl_->requires_grad = value;
  return *this;
}

bool Tensor::needs_grad() const { return impl_->requires_grad || impl_->grad_fn != nullptr; }

Tensor Tensor::grad() const { return Tensor(impl_->grad); }

void Tensor::zero_grad() const { impl_->grad.reset(); }

void Tensor::backward() const { autograd::backward(*this); }

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->shape = impl_->shape;
  impl->dtype = impl_->dtype;
  impl->device = impl_->device;
  return Tensor(std::move(impl));
}

Tensor& Tensor::set_name(std::string name) {
  impl_->name = std::move(name);
  return *this;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape(), dtype(), device());
  std::memcpy(t.impl_->storage->raw_data(), impl_->storage->data(bytes()), bytes());
  return t;
}

void Tensor::copy_from(const Tensor& src) const {
  if (src.numel() != numel() || src.dtype() != dtype()) {
    throw std::invalid_argument("copy_from: source " + shape_str(src.shape()) + " " + dtype_name(src.dtype()) +
                                " does not match destination " + shape_str(shape()) + " " + dtype_name(dtype()));
  }
  std::memcpy(impl_->storage->data(bytes()), src.impl_->storage->data(src.bytes()), bytes());
}

}  // namespace dpt
