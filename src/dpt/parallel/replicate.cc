#include "dpt/parallel/replicate.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "dpt/core/device_memory.h"
#include "dpt/data/loader.h"
#include "dpt/ops/ops.h"

namespace dpt::parallel {

std::vector<Tensor> replicate(const std::vector<Tensor>& params, Device device) {
  std::vector<Tensor> copies;
  copies.reserve(params.size());
  for (const Tensor& p : params) {
    Tensor copy = Tensor::empty(p.shape(), p.dtype(), device);
    copy.copy_from(p);
    copies.push_back(copy.set_requires_grad(true).set_name(p.name()));
  }
  return copies;
}

namespace {
Tensor host_rows(const Tensor& t, int64_t begin, int64_t rows, Device device);

// Rows [begin, begin + rows) of t in a tensor of their own on t's device (a GPU's copied
// there, device to device).
Tensor rows_of(const Tensor& t, int64_t begin, int64_t rows) {
  if (t.device().kind != Device::Kind::cuda) return host_rows(t, begin, rows, t.device());
  Shape shape = t.shape();
  shape[0] = rows;
  Tensor out = Tensor::empty(shape, t.dtype(), t.device());
  const size_t row_bytes = t.bytes() / static_cast<size_t>(t.dim(0));
  device_memory(t.device())
      .copy_on_device(t.device().index, out.storage().raw_data(),
                      static_cast<const char*>(t.storage().raw_data()) + static_cast<size_t>(begin) * row_bytes,
                      static_cast<size_t>(rows) * row_bytes);
  return out;
}
}  // namespace

Shard shard_slice(const Shard& shard, int64_t begin, int64_t rows) {
  // The labels from the host copy split_batch kept (a GPU shard's y is on the GPU).
  Tensor labels = rows_of(shard.host_labels.defined() ? shard.host_labels : shard.y, begin, rows);
  return {rows_of(shard.X, begin, rows), labels.to(shard.y.device()), labels, shard.first_row + begin};
}

namespace {
// Rows [begin, begin + rows) of t, copied into a tensor of their own on the host (the
// loader's batches live there; a CPU device's tensors are host tensors too).
Tensor host_rows(const Tensor& t, int64_t begin, int64_t rows, Device device) {
  Shape shape = t.shape();
  shape[0] = rows;
  const Device host = device.kind == Device::Kind::cuda ? Device::cpu() : device;
  Tensor out = Tensor::empty(shape, t.dtype(), host);
  const size_t row_bytes = t.bytes() / static_cast<size_t>(t.dim(0));
  std::memcpy(out.storage().data(out.bytes()),
              static_cast<const char*>(t.storage().data(t.bytes())) + static_cast<size_t>(begin) * row_bytes,
              static_cast<size_t>(rows) * row_bytes);
  return out;
}
}  // namespace

Tensor shard_loss_sum(const Tensor& logits, const Shard& shard, const nn::Loss* loss) {
  if (shard.y.device().kind == Device::Kind::cuda && logits.ndim() == 2) {
    ops::check_labels(shard.host_labels.defined() ? shard.host_labels : shard.y.to(Device::cpu()), logits.dim(1));
  }
  static const nn::CrossEntropyLoss cross_entropy;
  return (loss ? *loss : cross_entropy).sum(logits, shard.y);  // the CPU backend checks its own labels
}

std::vector<Shard> split_batch(const Tensor& X, const Tensor& y, const std::vector<Device>& devices, int64_t chunk,
                               int64_t first_row) {
  const int64_t batch = X.dim(0);
  const int64_t n = static_cast<int64_t>(devices.size());
  if (y.dim(0) != batch) {
    throw std::invalid_argument("split_batch: " + std::to_string(batch) + " images but " + std::to_string(y.dim(0)) +
                                " labels");
  }
  if (n == 0) throw std::invalid_argument("split_batch: no devices");
  if (data::chunks_in(batch, chunk) < n) {
    throw std::invalid_argument("split_batch: a batch of " + std::to_string(batch) + " examples cannot be split over " +
                                std::to_string(n) + " devices; use a batch size of at least " + std::to_string(n) +
                                " or fewer devices");
  }
  std::vector<Shard> shards;
  for (int64_t i = 0; i < n; ++i) {
    const data::RowRange rows = data::shard_rows(batch, n, i, chunk);
    // Cut on the host, then sent to a GPU whole.
    Tensor labels = host_rows(y, rows.begin, rows.size(), devices[i]);
    shards.push_back({host_rows(X, rows.begin, rows.size(), devices[i]).to(devices[i]), labels.to(devices[i]), labels,
                      first_row + rows.begin});
  }
  return shards;
}

}  // namespace dpt::parallel
