#include "dpt/parallel/allreduce.h"

#include <stdexcept>

#include "dpt/core/device_memory.h"
#include "dpt/ops/backend.h"
#include "dpt/parallel/sharded_collectives.h"

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

size_t total_values(const std::vector<Tensor>& tensors) {
  size_t total = 0;
  for (const Tensor& t : tensors) total += static_cast<size_t>(t.numel());
  return total;
}

namespace {
bool on_gpu(const std::vector<Tensor>& tensors) {
  return !tensors.empty() && tensors[0].device().kind == Device::Kind::cuda;
}
}  // namespace

void pack_to_host(const std::vector<Tensor>& tensors, std::vector<float>& flat) {
  flat.resize(total_values(tensors));  // a caller's vector: its memory is reused step after step
  if (!on_gpu(tensors)) {
    ops::cpu_backend().pack(tensors, flat.data());
    return;
  }
  const Device device = tensors[0].device();
  const Tensor staged = Tensor::empty({static_cast<int64_t>(flat.size())}, DType::f32, device);
  ops::backend_for(tensors[0]).pack(tensors, static_cast<float*>(staged.storage().raw_data()));
  device_memory(device).copy_to_host(device.index, flat.data(), staged.storage().raw_data(), flat.size() * sizeof(float));
}

void unpack_from_host(const std::vector<float>& flat, const std::vector<Tensor>& tensors, float scale) {
  if (!on_gpu(tensors)) {
    ops::cpu_backend().unpack(flat.data(), tensors, scale);
    return;
  }
  const Tensor staged = Tensor::from_vector(flat, {static_cast<int64_t>(flat.size())}, tensors[0].device());
  ops::backend_for(tensors[0]).unpack(static_cast<const float*>(staged.storage().raw_data()), tensors, scale);
}

void allreduce_tensors(Communicator& comm, int rank, const std::vector<Tensor>& tensors,
                       std::vector<float>& flat_buffer, float scale, Compression compression) {
  if (!on_gpu(tensors) || !comm.reduces_device_memory()) {  // summed on the host
    pack_to_host(tensors, flat_buffer);
    comm.allreduce_compressed(rank, flat_buffer.data(), flat_buffer.size(), compression);
    unpack_from_host(flat_buffer, tensors, scale);
    return;
  }
  // NCCL sums them where they are: packed, reduced and unpacked on the GPU.
  const size_t total = total_values(tensors);
  const Tensor flat = Tensor::empty({static_cast<int64_t>(total)}, DType::f32, tensors[0].device());
  auto* device_flat = static_cast<float*>(flat.storage().raw_data());
  const ops::Backend& kernels = ops::backend_for(tensors[0]);
  kernels.pack(tensors, device_flat);
  comm.allreduce_compressed(rank, device_flat, total, compression);
  kernels.unpack(device_flat, tensors, scale);
}

void broadcast_tensors(Communicator& comm, int rank, const std::vector<Tensor>& tensors, std::vector<float>& flat,
                       int root) {
  if (total_values(tensors) == 0) return;
  pack_to_host(tensors, flat);
  comm.broadcast(rank, flat.data(), flat.size(), root);
  unpack_from_host(flat, tensors, 1.0f);
}

std::vector<Tensor> gradients_of(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  grads.reserve(params.size());
  for (const Tensor& p : params) grads.push_back(p.ensure_grad());
  return grads;
}

void reduce_scatter_gradients(Communicator& comm, int rank, const std::vector<Tensor>& params,
                              std::vector<float>& flat_buffer, float scale, Compression compression) {
  const std::vector<Tensor> grads = gradients_of(params);
  pack_to_host(grads, flat_buffer);
  reduce_scatter_sum(comm, rank, flat_buffer.data(), flat_buffer.size(), compression);
  unpack_from_host(flat_buffer, grads, scale);
}

void allreduce_gradients(Communicator& comm, int rank, const std::vector<Tensor>& params,
                         std::vector<float>& flat_buffer, float scale, Compression compression) {
  const std::vector<Tensor> grads = gradients_of(params);
  allreduce_tensors(comm, rank, grads, flat_buffer, scale, compression);
}

}  // namespace dpt::parallel
