#include "dpt/parallel/chunk_tree.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dpt::parallel {

namespace {
int64_t span_of(int level) { return int64_t{1} << level; }

// Whether node (lo, level) is one the tree has: aligned, starting inside [0, chunks).
bool aligned(int64_t lo, int level) { return lo % span_of(level) == 0; }

// The chunks node (lo, level) covers end here.
int64_t node_end(int64_t lo, int level, int64_t chunks) { return std::min(lo + span_of(level), chunks); }

// Whether `node` has a parent lying inside [begin, end): then the node is not final. (The
// root, the node that spans every chunk, has none.)
bool parent_inside(const TreeNode& node, int64_t begin, int64_t end, int64_t chunks) {
  if (span_of(node.level) >= chunks) return false;
  const int64_t parent_lo = node.lo - node.lo % span_of(node.level + 1);
  return parent_lo >= begin && node_end(parent_lo, node.level + 1, chunks) <= end;
}

void add_into(std::vector<float>& into, const std::vector<float>& from) {
  if (into.size() != from.size()) throw std::logic_error("ChunkTree: sums of different sizes");
  for (size_t i = 0; i < into.size(); ++i) into[i] += from[i];
}

// Merges the top of `stack` while it can: two siblings (left += right), or a left child
// whose right sibling would start past the last chunk (the parent equals it).
void reduce_stack(std::vector<TreeNode>& stack, int64_t begin, int64_t end, int64_t chunks, bool with_sums) {
  for (;;) {
    TreeNode& top = stack.back();
    if (!parent_inside(top, begin, end, chunks)) return;
    const bool is_left = aligned(top.lo, top.level + 1);
    if (is_left) {
      if (top.lo + span_of(top.level) < chunks) return;  // its right sibling is still to come
      ++top.level;                                        // no right sibling: the parent is this node
      continue;
    }
    if (stack.size() < 2) return;
    TreeNode& left = stack[stack.size() - 2];
    if (left.level != top.level || left.lo + span_of(left.level) != top.lo) return;
    if (with_sums) add_into(left.sum, top.sum);
    ++left.level;
    stack.pop_back();
  }
}
}  // namespace

std::vector<TreeNode> tree_nodes_of(int64_t begin, int64_t end, int64_t chunks) {
  std::vector<TreeNode> stack;
  for (int64_t c = begin; c < end; ++c) {
    stack.push_back({c, 0, {}});
    reduce_stack(stack, begin, end, chunks, /*with_sums=*/false);
  }
  return stack;
}

ChunkTree::ChunkTree(int64_t begin, int64_t end, int64_t chunks)
    : begin_(begin), end_(end), chunks_(chunks), next_(begin) {
  if (begin < 0 || begin > end || end > chunks) {
    throw std::invalid_argument("ChunkTree: chunks [" + std::to_string(begin) + ", " + std::to_string(end) +
                                ") are not inside a step of " + std::to_string(chunks));
  }
}

void ChunkTree::add_chunk(int64_t index, std::vector<float> values) {
  if (index != next_ || index >= end_) {
    throw std::logic_error("ChunkTree: chunk " + std::to_string(index) + " added out of order");
  }
  ++next_;
  stack_.push_back({index, 0, std::move(values)});
  reduce_stack(stack_, begin_, end_, chunks_, /*with_sums=*/true);
}

std::vector<TreeNode> merge_nodes(std::vector<TreeNode> nodes, int64_t begin, int64_t end, int64_t chunks) {
  std::vector<TreeNode> stack;
  int64_t covered = begin;
  for (TreeNode& node : nodes) {
    if (node.lo != covered) throw std::logic_error("merge_nodes: the nodes do not partition the chunks in order");
    covered = node_end(node.lo, node.level, chunks);
    stack.push_back(std::move(node));
    reduce_stack(stack, begin, end, chunks, /*with_sums=*/true);
  }
  if (covered != end) {
    throw std::logic_error("merge_nodes: the nodes cover chunks [" + std::to_string(begin) + ", " +
                           std::to_string(covered) + ") of [" + std::to_string(begin) + ", " + std::to_string(end) +
                           ")");
  }
  return stack;
}

std::vector<float> combine_nodes(std::vector<TreeNode> nodes, int64_t chunks) {
  std::vector<TreeNode> stack = merge_nodes(std::move(nodes), 0, chunks, chunks);
  if (stack.size() != 1) {
    throw std::logic_error("combine_nodes: " + std::to_string(stack.size()) + " nodes left for " +
                           std::to_string(chunks) + " chunks");
  }
  return std::move(stack.front().sum);
}

}  // namespace dpt::parallel
