#include "dpt/core/allocator.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace dpt {

namespace {
// Sizes are rounded up so that blocks of nearly equal size share a bucket.
size_t bucket_size(size_t bytes) {
  const size_t granule = bytes <= 4096 ? 64 : 4096;
  return bytes == 0 ? granule : (bytes + granule - 1) / granule * granule;
}

struct BlockCache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
};

// Leaked on purpose: tensors in static objects may be freed after the cache would be destroyed.
BlockCache& cache() {
  static auto* instance = new BlockCache;
  return *instance;
}
}  // namespace

void* allocate_host(size_t bytes) {
  const size_t size = bucket_size(bytes);
  {
    BlockCache& c = cache();
    std::lock_guard lock(c.mutex);
    auto found = c.free_blocks.find(size);
    if (found != c.free_blocks.end() && !found->second.empty()) {
      void* block = found->second.back();
      found->second.pop_back();
      return block;
    }
  }
  void* block = std::aligned_alloc(64, size);
  if (!block) throw std::bad_alloc();
  return block;
}

void release_host(void* block, size_t bytes) {
  if (!block) return;
  BlockCache& c = cache();
  std::lock_guard lock(c.mutex);
  c.free_blocks[bucket_size(bytes)].push_back(block);
}

}  // namespace dpt
