#include "dpt/parallel/allreduce.h"

#include <cstring>
#include <stdexcept>

namespace dpt::parallel {

void allreduce(const std::vector<Tensor>& data) {
  if (data.empty()) return;
  const int64_t n = data[0].numel();
  for (const Tensor& t : data) {
    if (t.numel() != n) throw std::invalid_argument("allreduce: tensors of different sizes");
  }
  float* sum = data[0].data<float>();
  for (size_t i = 1; i < data.size(); ++i) {
    const float* part = data[i].data<float>();
    for (int64_t k = 0; k < n; ++k) sum[k] += part[k];
  }
  for (size_t i = 1; i < data.size(); ++i) data[i].copy_from(data[0]);
}

void allreduce_tensors(Communicator& comm, int rank, const std::vector<Tensor>& tensors,
                       std::vector<float>& flat_buffer, float scale) {
  size_t total = 0;
  for (const Tensor& t : tensors) total += static_cast<size_t>(t.numel());
  flat_buffer.resize(total);
  size_t offset = 0;
  for (const Tensor& t : tensors) {
    std::memcpy(flat_buffer.data() + offset, t.data<float>(), t.bytes());
    offset += static_cast<size_t>(t.numel());
  }
  comm.allreduce_sum(rank, flat_buffer.data(), total);
  offset = 0;
  for (const Tensor& t : tensors) {
    float* out = t.data<float>();
    for (int64_t k = 0; k < t.numel(); ++k) out[k] = flat_buffer[offset + static_cast<size_t>(k)] * scale;
    offset += static_cast<size_t>(t.numel());
  }
}

void allreduce_gradients(Communicator& comm, int rank, const std::vector<Tensor>& params,
                         std::vector<float>& flat_buffer, float scale) {
  std::vector<Tensor> grads;
  grads.reserve(params.size());
  for (const Tensor& p : params) {
    if (!p.grad().defined()) p.impl()->grad = Tensor::zeros(p.shape(), DType::f32, p.device()).impl_ptr();
    grads.push_back(p.grad());
  }
  allreduce_tensors(comm, rank, grads, flat_buffer, scale);
}

}  // namespace dpt::parallel
