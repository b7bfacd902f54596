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

}  // namespace

void ReplicaGroup::deterministic_step(const std::vector<Shard>& shards, int64_t global_batch,
                                      const ShardForward& forward, float gradient_scale, GradientSync sync) {
  const int64_t chunks = data::chunks_in(global_batch, options_.deterministic_chunk);
  const auto shard_of = [&](int device) { return device < static_cast<int>(shards.size()) ? &shards[device] : nullptr; };
  if (hierarchy_ == nullptr) {  // every device's nodes summed over the job's devices
    pool_.run_all([&](int device) {
      DeviceTrees trees = chunk_trees(device, shard_of(device), global_batch, forward);
      const trace::Span span(trace::Phase::tree_sum);  // to the end of the step
      const ReplicaTensors& replica = replicas_[device];
      std::vector<float> gradient = tree_sum(device, trees.gradients, chunks, total_values(replica.params));
      std::vector<float> buffers;
      if (!replica.buffers.empty()) buffers = tree_sum(device, trees.buffers, chunks, total_values(replica.buffers));
      finish_chunks(device, std::move(gradient), buffers, chunks, gradient_scale, sync);
    });
    return;
  }
  // Several devices per process: the devices' nodes merged within the process, the
  // processes' nodes summed between them, the sums handed to every device.
  std::vector<DeviceTrees> trees(pool_.size());
  pool_.run_all([&](int device) { trees[device] = chunk_trees(device, shard_of(device), global_batch, forward); });
  std::vector<float> gradient, buffers;
  pool_.run_on(0, [&] {
    const trace::Span span(trace::Phase::tree_sum);
    std::vector<std::vector<TreeNode>> gradient_nodes, buffer_nodes;
    for (DeviceTrees& t : trees) {
      gradient_nodes.push_back(std::move(t.gradients));
      buffer_nodes.push_back(std::move(t.buffers));
    }
    gradient = process_tree_sum(std::move(gradient_nodes), chunks, total_values(replicas_[0].params));
    if (!replicas_[0].buffers.empty()) {
      buffers = process_tree_sum(std::move(buffer_nodes), chunks, total_values(replicas_[0].buffers));
    }
  });
  pool_.run_all([&](int device) { finish_chunks(device, gradient, buffers, chunks, gradient_scale, sync); });
}

ReplicaGroup::DeviceTrees ReplicaGroup::chunk_trees(int device, const Shard* shard, int64_t global_batch,
                                                    const ShardForward& forward) {
  const int64_t chunk = options_.deterministic_chunk;
  const int64_t chunks = data::chunks_in(global_batch, chunk);
  const data::RowRange mine = device_share(device, chunks, 1);
  const data::RowRange rows = device_share(device, global_batch, chunk);
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
  return {std::move(gradient_tree.nodes()), std::move(buffer_tree.nodes())};
}

void ReplicaGroup::finish_chunks(int device, std::vector<float> gradient, const std::vector<float>& buffers,
                                 int64_t chunks, float gradient_scale, GradientSync sync) {
  const ReplicaTensors& replica = replicas_[device];
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
  // The running statistics: their mean over the chunks, summed in the same tree.
  if (!replica.buffers.empty()) unpack_from_host(buffers, replica.buffers, 1.0f / static_cast<float>(chunks));
}

std::vector<float> ReplicaGroup::process_tree_sum(std::vector<std::vector<TreeNode>> by_device, int64_t chunks,
                                                  size_t values) {
  std::vector<TreeNode> nodes;
  for (std::vector<TreeNode>& device_nodes : by_device) {
    for (TreeNode& node : device_nodes) nodes.push_back(std::move(node));
  }
  const ProcessGroup& group = options_.process_group;
  const data::RowRange mine = data::shard_rows(chunks, group.size(), group.rank);
  nodes = merge_nodes(std::move(nodes), mine.begin, mine.end, chunks);
  return tree_allreduce(*group.comm, group.rank, devices()[0], nodes, chunks, values);
}

std::vector<float> ReplicaGroup::tree_sum(int device, const std::vector<TreeNode>& mine, int64_t chunks,
                                          size_t values) {
  if (job_replicas() == 1) return combine_nodes(mine, chunks);
  return tree_allreduce(*comm_, global_rank(device), pool_.devices()[device], mine, chunks, values);
}

}  // namespace dpt::parallel
