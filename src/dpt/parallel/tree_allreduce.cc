#include "dpt/parallel/tree_allreduce.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "dpt/data/loader.h"
#include "dpt/parallel/ring_schedule.h"

namespace dpt::parallel {

std::vector<std::vector<TreeNode>> tree_nodes_by_rank(int64_t chunks, int ranks) {
  std::vector<std::vector<TreeNode>> nodes;
  for (int r = 0; r < ranks; ++r) {
    const data::RowRange range = data::shard_rows(chunks, ranks, r);
    nodes.push_back(tree_nodes_of(range.begin, range.end, chunks));
  }
  return nodes;
}

namespace {
using Block = Communicator::Block;

// comm.alltoall of f32 host blocks. A communicator of device memory gets them staged on
// `device`: every send block copied into one buffer there, the receive blocks laid out in
// another, and the received bytes copied back to the host blocks. Every rank finishes its
// staging (allocations included) before any enqueues its half of the exchange: a rank
// allocating GPU memory while a peer waits on a pending NCCL kernel can deadlock in the
// driver.
void host_alltoall(Communicator& comm, int rank, Device device, const std::vector<Block>& send,
                   const std::vector<Block>& receive) {
  if (!comm.reduces_device_memory()) {
    comm.alltoall(rank, send, receive, DType::f32);
    return;
  }
  std::vector<float> outgoing;
  size_t incoming = 0;
  for (const Block& b : send) {
    const auto* first = static_cast<const float*>(b.data);
    outgoing.insert(outgoing.end(), first, first + b.count);
  }
  for (const Block& b : receive) incoming += b.count;
  const Tensor device_send = Tensor::from_vector(outgoing, {static_cast<int64_t>(outgoing.size())}, device);
  const Tensor device_receive = Tensor::empty({static_cast<int64_t>(incoming)}, DType::f32, device);
  const auto blocks_in = [](const Tensor& flat, const std::vector<Block>& like) {
    std::vector<Block> blocks;
    auto* at = static_cast<float*>(flat.storage().raw_data());
    for (const Block& b : like) {
      blocks.push_back({at, b.count});
      at += b.count;
    }
    return blocks;
  };
  comm.barrier(rank);
  comm.alltoall(rank, blocks_in(device_send, send), blocks_in(device_receive, receive), DType::f32);
  const std::vector<float> received = device_receive.to_vector();  // waits for the exchange (stream order)
  size_t at = 0;
  for (const Block& b : receive) {
    std::copy(received.begin() + static_cast<std::ptrdiff_t>(at),
              received.begin() + static_cast<std::ptrdiff_t>(at + b.count), static_cast<float*>(b.data));
    at += b.count;
  }
}
}  // namespace

std::vector<float> tree_allreduce(Communicator& comm, int rank, Device device, const std::vector<TreeNode>& mine,
                                  int64_t chunks, size_t values) {
  const int n = comm.size();
  const std::vector<std::vector<TreeNode>> held = tree_nodes_by_rank(chunks, n);
  if (mine.size() != held[rank].size()) {
    throw std::logic_error("tree_allreduce: rank " + std::to_string(rank) + " holds " + std::to_string(mine.size()) +
                           " nodes, the chunks' split gives it " + std::to_string(held[rank].size()));
  }
  const ring::Range own = ring::chunk(rank, values, n);

  // 1. Slice d of each of my nodes to rank d; every rank's nodes of my slice to me.
  std::vector<std::vector<float>> outgoing(n), incoming(n);
  std::vector<Block> send(n), receive(n);
  for (int d = 0; d < n; ++d) {
    const ring::Range slice = ring::chunk(d, values, n);
    for (const TreeNode& node : mine) {
      outgoing[d].insert(outgoing[d].end(), node.sum.begin() + slice.begin, node.sum.begin() + slice.end);
    }
    send[d] = {outgoing[d].data(), outgoing[d].size()};
    incoming[d].resize(held[d].size() * own.size());
    receive[d] = {incoming[d].data(), incoming[d].size()};
  }
  host_alltoall(comm, rank, device, send, receive);

  // 2. My slice of the root, combined in the tree's order.
  std::vector<TreeNode> nodes;
  for (int s = 0; s < n; ++s) {
    for (size_t i = 0; i < held[s].size(); ++i) {
      TreeNode node = held[s][i];
      const auto first = incoming[s].begin() + static_cast<std::ptrdiff_t>(i * own.size());
      node.sum.assign(first, first + static_cast<std::ptrdiff_t>(own.size()));
      nodes.push_back(std::move(node));
    }
  }
  std::vector<float> own_sum = combine_nodes(std::move(nodes), chunks);

  // 3. Every finished slice to every rank.
  std::vector<float> root(values);
  for (int d = 0; d < n; ++d) {
    const ring::Range slice = ring::chunk(d, values, n);
    send[d] = {own_sum.data(), own_sum.size()};
    receive[d] = {root.data() + slice.begin, slice.size()};
  }
  host_alltoall(comm, rank, device, send, receive);
  return root;
}

}  // namespace dpt::parallel
