// The fixed summation tree of --deterministic: the gradient of a step is the sum of its
// chunks' gradients (chunk c: rows [c K, (c + 1) K) of the global batch), added in one
// binary tree over the chunk indices whatever the number of devices. The tree is the
// dyadic one: node (lo, level) covers chunks [lo, lo + 2^level) ∩ [0, chunks), and is
// its left child plus its right child (left += right), or its left child alone when the
// right one starts past the last chunk. Float addition is commutative but not
// associative: fixing the tree fixes every bit of the sum.
//
// A device holding chunks [begin, end) sums them into the largest nodes that lie inside
// its range (ChunkTree); the nodes of all devices, exchanged, are then combined by the
// same rule (combine_nodes). One device holding every chunk computes the same nodes by the
// same additions, so 1, 2, 3 or N devices end with the same bits.
#pragma once

#include <cstdint>
#include <vector>

namespace dpt::parallel {

struct TreeNode {
  int64_t lo = 0;
  int level = 0;
  std::vector<float> sum;  // the node's elementwise sum
};

// The nodes that a device holding chunks [begin, end) of `chunks` ends with, in order,
// without their sums: what every rank knows of every other rank before the exchange.
std::vector<TreeNode> tree_nodes_of(int64_t begin, int64_t end, int64_t chunks);

class ChunkTree {
 public:
  // Sums chunks [begin, end) of a step of `chunks` chunks.
  ChunkTree(int64_t begin, int64_t end, int64_t chunks);
  // Adds the sum of chunk `index` (the next one: begin, begin + 1, ...); merges every pair
  // of sibling nodes as soon as both are complete, so at most log2 of the range's length
  // nodes are held at once.
  void add_chunk(int64_t index, std::vector<float> values);
  // The device's nodes once every chunk of [begin, end) was added (tree_nodes_of's).
  std::vector<TreeNode>& nodes() { return stack_; }

 private:
  void merge_complete_siblings();
  int64_t begin_, end_, chunks_;
  int64_t next_;
  std::vector<TreeNode> stack_;
};

// The nodes of chunks [begin, end) (tree_nodes_of's, with their sums) from nodes that
// partition that range in order (the nodes of devices holding consecutive parts of it,
// concatenated): merged by the tree's rule, so with the same bits as one device summing
// the whole range.
std::vector<TreeNode> merge_nodes(std::vector<TreeNode> nodes, int64_t begin, int64_t end, int64_t chunks);

// The root's sum from nodes that partition [0, chunks) in order (every device's nodes,
// concatenated by rank): the sum of every chunk, in the tree's order.
std::vector<float> combine_nodes(std::vector<TreeNode> nodes, int64_t chunks);

}  // namespace dpt::parallel
