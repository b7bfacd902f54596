#include "dpt/parallel/allreduce.h"

#include <stdexcept>

#include "dpt/ops/backend.h"

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
  const bool on_gpu = !tensors.empty() && tensors[0].device().kind == Device::Kind::cuda;
  const ops::Backend& kernels = on_gpu ? ops::backend_for(tensors[0]) : ops::cpu_backend();
  if (!on_gpu) {  // packed into flat_buffer, whose memory every step reuses
    flat_buffer.resize(total);
    kernels.pack(tensors, flat_buffer.data());
    comm.allreduce_sum(rank, flat_buffer.data(), total);
    kernels.unpack(flat_buffer.data(), tensors, scale);
    return;
  }
  // GPU tensors are packed on their GPU. NCCL reduces them there; a host backend gets the
  // packed buffer copied to flat_buffer and back, one copy each way.
  const Tensor flat = Tensor::empty({static_cast<int64_t>(total)}, DType::f32, tensors[0].device());
  auto* device_flat = static_cast<float*>(flat.storage().raw_data());
  kernels.pack(tensors, device_flat);
  if (comm.reduces_device_memory()) {
    comm.allreduce_sum(rank, device_flat, total);
  } else {
    flat_buffer = flat.to_vector();
    comm.allreduce_sum(rank, flat_buffer.data(), total);
    flat.copy_from(Tensor::from_vector(flat_buffer, flat.shape()));
  }
  kernels.unpack(device_flat, tensors, scale);
}

void allreduce_gradients(Communicator& comm, int rank, const std::vector<Tensor>& params,
                         std::vector<float>& flat_buffer, float scale) {
  std::vector<Tensor> grads;
  grads.reserve(params.size());
  for (const Tensor& p : params) grads.push_back(p.ensure_grad());
  allreduce_tensors(comm, rank, grads, flat_buffer, scale);
}

}  // namespace dpt::parallel
