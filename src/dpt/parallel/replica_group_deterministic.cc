// ReplicaGroup's deterministic mode (see replica_group.h and chunk_tree.h): chunks of the
// global batch computed one by one, their gradients and running statistics summed in
// the fixed tree over chunk indices. The tree adds on the host: a GPU replica's chunk
// gradients cross to it once per chunk (pack_to_host), the price of the mode on GPUs.
#include <stdexcept>
#include <string>

#include "dpt/autograd/engine.h"
#include "dpt/core/trace.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/ledger.h"
#include "dpt/ops/ops.h"
#include "dpt/parallel/allreduce.h"
#include "dpt/parallel/replica_group.h"
#include "dpt/parallel/tree_allreduce.h"

namespace dpt::parallel {

namespace {
std::vector<float> packed(const std::vector<Tensor>& tensors) {
  std::vector<float> flat;
  pack_to_host(tensors, flat);
  return flat;
}

std::vector<Tensor> gradients_of(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (const Tensor& p : params) grads.push_back(p.ensure_grad());
  return grads;
}
}  // namespace

void ReplicaGroup::deterministic_step(const std::vector<Shard>& shards, int64_t global_batch,
                                      const ShardForward& forward, float gradient_scale, GradientSync sync) {
  pool_.run_all([&](int device) {
    const Shard* shard = device < static_cast<int>(shards.size()) ? &shards[device] : nullptr;
    compute_chunks(device, shard, global_batch, forward, gradient_scale, sync);
  });
}

void ReplicaGroup::compute_chunks(int device, const Shard* shard, int64_t global_batch,
                                  const ShardForward& forward, float gradient_scale, GradientSync sync) {
  const int64_t chunk = options_.deterministic_chunk;
  const int64_t chunks = data::chunks_in(global_batch, chunk);
  const data::RowRange mine = data::shard_rows(chunks, job_replicas(), global_rank(device));
  const data::RowRange rows = data::shard_rows(global_batch, job_replicas(), global_rank(device), chunk);
  const int64_t shard_rows = shard != nullptr ? shard->X.dim(0) : 0;
  if (shard_rows != rows.size()) {
    throw std::logic_error("deterministic step: device " + std::to_string(device) + " got " +
                           std::to_string(shard_rows) + " examples for chunks holding " + std::to_string(rows.size()));
  }
  const ReplicaTensors& replica = replicas_[device];
  const std::vector<float> buffers_at_start = packed(replica.buffers);
  ChunkTree gradient_tree(mine.begin, mine.end, chunks), buffer_tree(mine.begin, mine.end, chunks);
  for (int64_t c = mine.begin; c < mine.end; ++c) {
    const int64_t first = c * chunk - rows.begin;
    const Shard part = shard_slice(*shard, first, std::min(chunk, shard_rows - first));
    // Every chunk starts from the step's running statistics, so that each chunk's update
    // of them depends on that chunk alone.
    unpack_from_host(buffers_at_start, replica.buffers, 1.0f);
    for (const Tensor& p : replica.params) p.zero_grad();
    ShardOutput out;
    {
      const trace::Span span(trace::Phase::forward, c);
      out = forward(device, part);
    }
    {
      const trace::Span span(trace::Phase::backward, c);
      autograd::backward(out.loss_sum);
    }
    gradient_tree.add_chunk(c, packed(gradients_of(replica.params)));
    buffer_tree.add_chunk(c, packed(replica.buffers));
    ops::add_step_figures(ledgers_[device], out.loss_sum, out.logits.detach(), part.y);
  }
  const trace::Span tree_span(trace::Phase::tree_sum);  // to the end of the step
  std::vector<float> gradient = tree_sum(device, gradient_tree.nodes(), chunks, total_values(replica.params));
  // Gradient accumulation: the earlier steps' tree sums, added in step order.
  std::vector<float>& held = accumulated_[device];
  if (accumulating_) {
    for (size_t i = 0; i < gradient.size(); ++i) gradient[i] = held[i] + gradient[i];
  }
  if (sync == GradientSync::later) {
    held = std::move(gradient);
  } else {
    held.clear();
    unpack_from_host(gradient, gradients_of(replica.params), gradient_scale);
  }
  if (!replica.buffers.empty()) {
    // The running statistics: their mean over the chunks, summed in the same tree.
    const std::vector<float> buffers = tree_sum(device, buffer_tree.nodes(), chunks, total_values(replica.buffers));
    unpack_from_host(buffers, replica.buffers, 1.0f / static_cast<float>(chunks));
  }
}

std::vector<float> ReplicaGroup::tree_sum(int device, const std::vector<TreeNode>& mine, int64_t chunks,
                                          size_t values) {
  if (job_replicas() == 1) return combine_nodes(mine, chunks);
  return tree_allreduce(*comm_, global_rank(device), pool_.devices()[device], mine, chunks, values);
}

}  // namespace dpt::parallel
