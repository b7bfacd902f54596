// The lesson's first two steps of data parallelism: give every device its own copy of the
// parameters, and cut each minibatch into one shard per device.
#pragma once

#include <vector>

#include "dpt/core/tensor.h"
#include "dpt/nn/loss.h"

namespace dpt::parallel {

// A copy of `params` on `device`, each requiring grad: a replica that its device updates
// on its own (the lesson's get_params).
std::vector<Tensor> replicate(const std::vector<Tensor>& params, Device device);

struct Shard {
  Tensor X;
  Tensor y;
  // y on the host, where split_batch cut it (y itself for a CPU shard): the labels are
  // checked there (shard_loss_sum), so a GPU step never waits to learn of a bad label.
  Tensor host_labels;
  // The row of X's first example in the global batch: split_batch and shard_slice keep it,
  // so that every example is known by the same row on any device count (nn::StepContext).
  int64_t first_row = 0;
};

// Splits X [B, ...] and y [B] along the batch axis into one shard per device, as evenly as
// possible: the first B % N shards get one extra example (256 over 3 is 86/85/85). Throws
// std::invalid_argument when B < N, since a device would get nothing to compute. With
// `chunk` > 1 whole chunks of that many rows are shared out instead (data::shard_rows).
// `first_row`: the row of X's first example in the global batch (a process's shard).
std::vector<Shard> split_batch(const Tensor& X, const Tensor& y, const std::vector<Device>& devices,
                               int64_t chunk = 1, int64_t first_row = 0);

// Rows [begin, begin + rows) of a shard, copied.
Shard shard_slice(const Shard& shard, int64_t begin, int64_t rows);

// The shard's `loss` summed over its examples, from outputs [n, K] (null: softmax
// cross-entropy): a label outside [0, K) throws as the CPU backend's cross_entropy does
// (ops::check_labels), checked on the host copy of the labels for a GPU shard (copied back
// only when a caller built the shard without one).
Tensor shard_loss_sum(const Tensor& logits, const Shard& shard, const nn::Loss* loss = nullptr);

}  // namespace dpt::parallel
