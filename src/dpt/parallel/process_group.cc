#include "dpt/parallel/process_group.h"

#include <cstdint>

namespace dpt::parallel {

int agree_on_stop(const ProcessGroup& group, int signal) {
  if (!group.distributed()) return signal;
  // The maximum, not a mean: a mean of different signals names one nobody sent (SIGINT and
  // SIGTERM average to 9, SIGKILL), and an exact integer needs no float rounding.
  int64_t agreed = signal;
  group.comm->allreduce(group.rank, &agreed, 1, ReduceOp::max);
  return static_cast<int>(agreed);
}

std::vector<uint64_t> gather_digests(const ProcessGroup& group, uint64_t digest) {
  if (!group.distributed()) return {digest};
  std::vector<int64_t> all(static_cast<size_t>(group.size()), 0);
  all[static_cast<size_t>(group.rank)] = static_cast<int64_t>(digest);
  group.comm->allreduce(group.rank, all.data(), all.size(), ReduceOp::sum);
  return {all.begin(), all.end()};
}

namespace {

// Rank `root`'s `bytes` bytes of `text` on every rank: the collectives move i64 words.
std::string broadcast_bytes(const ProcessGroup& group, const std::string& text, size_t bytes, int root) {
  std::vector<int64_t> words((bytes + sizeof(int64_t) - 1) / sizeof(int64_t), 0);
  if (root == group.rank) text.copy(reinterpret_cast<char*>(words.data()), bytes);  // memcpy may not take null
  if (!words.empty()) group.comm->broadcast(group.rank, words.data(), words.size(), root);
  return {reinterpret_cast<const char*>(words.data()), bytes};
}

}  // namespace

std::string broadcast_string(const ProcessGroup& group, const std::string& text, int root) {
  if (!group.distributed()) return text;
  int64_t length = root == group.rank ? static_cast<int64_t>(text.size()) : 0;
  group.comm->broadcast(group.rank, &length, 1, root);
  return broadcast_bytes(group, text, static_cast<size_t>(length), root);
}

std::vector<std::string> gather_strings(const ProcessGroup& group, const std::string& text) {
  if (!group.distributed()) return {text};
  std::vector<int64_t> lengths(static_cast<size_t>(group.size()), 0);
  lengths[static_cast<size_t>(group.rank)] = static_cast<int64_t>(text.size());
  group.comm->allreduce(group.rank, lengths.data(), lengths.size(), ReduceOp::sum);
  std::vector<std::string> all;
  for (int root = 0; root < group.size(); ++root) {
    all.push_back(broadcast_bytes(group, text, static_cast<size_t>(lengths[static_cast<size_t>(root)]), root));
  }
  return all;
}

std::vector<std::string> device_names(const std::vector<Device>& devices, const ProcessGroup& group) {
  std::vector<std::string> names;
  if (!group.distributed()) {
    for (const Device& d : devices) names.push_back(d.str());
    return names;
  }
  for (int rank = 0; rank < group.size(); ++rank) {
    for (const Device& d : devices) names.push_back("rank " + std::to_string(rank) + " " + d.str());
  }
  return names;
}

}  // namespace dpt::parallel
