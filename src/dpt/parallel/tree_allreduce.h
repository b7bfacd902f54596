// The allreduce of --deterministic: every rank ends with the root sum of the fixed chunk
// tree (chunk_tree.h), the same bits as one rank combining every node, at about the ring's
// wire volume instead of one broadcast of every node to every rank.
//
// The elements are cut into one slice per rank (the ring's chunks, ring::chunk). Each
// rank sends every other rank that rank's slice of each of its nodes (one all-to-all);
// each rank combines the nodes' values of its own slice in the tree's order; a second
// all-to-all gives every rank every finished slice. The tree adds elementwise, so a slice
// combined alone has the bits it has in the whole. When each rank holds one node (a
// power-of-two number of ranks each holding an aligned run of chunks, say) a rank
// receives 2 (N-1)/N of the buffer, as in the ring; with k nodes, (k + 1) (N-1)/N.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dpt/parallel/chunk_tree.h"
#include "dpt/parallel/communicator.h"

namespace dpt::parallel {

// Which nodes (without sums) each rank of a step of `chunks` chunks holds when rank r
// sums chunks data::shard_rows(chunks, ranks, r): what every rank knows of every other.
std::vector<std::vector<TreeNode>> tree_nodes_by_rank(int64_t chunks, int ranks);

// Rank `rank` of `comm`, holding `mine` (its ChunkTree's nodes, each `values` floats, on
// the host): the root's sum of every rank's nodes. Every rank calls it with the same chunks
// and values. With a communicator of device memory (NCCL) the slices travel through
// buffers on `device`, the rank's GPU; the sums are the host's either way.
std::vector<float> tree_allreduce(Communicator& comm, int rank, Device device, const std::vector<TreeNode>& mine,
                                  int64_t chunks, size_t values);

}  // namespace dpt::parallel
