#include "dpt/parallel/allreduce.h"

#include <algorithm>
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

void allreduce_gradients(Communicator& comm, int rank, const std::vector<Tensor>& params,
                         std::vector<float>& flat_buffer) {
  size_t total = 0;
  for (const Tensor& p : params) total += static_cast<size_t>(p.numel());
  flat_buffer.resize(total);
  size_t offset = 0;
  for (const Tensor& p : params) {
    const Tensor grad = p.grad();
    const size_t n = static_cast<size_t>(p.numel());
    if (grad.defined()) {
      std::memcpy(flat_buffer.data() + offset, grad.data<float>(), n * sizeof(float));
    } else {
      std::fill_n(flat_buffer.data() + offset, n, 0.0f);
    }
    offset += n;
  }
  comm.allreduce_sum(rank, flat_buffer.data(), total);
  offset = 0;
  for (const Tensor& p : params) {
    const size_t n = static_cast<size_t>(p.numel());
    if (!p.grad().defined()) p.impl()->grad = Tensor::zeros(p.shape(), DType::f32, p.device()).impl_ptr();
    std::memcpy(p.grad().data<float>(), flat_buffer.data() + offset, n * sizeof(float));
    offset += n;
  }
}

}  // namespace dpt::parallel
