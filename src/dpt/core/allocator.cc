#include "dpt/core/allocator.h"

#include <atomic>
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

using FreeBlocks = std::unordered_map<size_t, std::vector<void*>>;

// More blocks of one size than a training step keeps alive at once on one device.
constexpr size_t kBlocksKeptPerThread = 16;
// Blocks larger than any core's caches gain nothing from staying with the thread that
// freed it, and 16 of them would idle gigabytes there (a 224x224 colour batch of 256 is
// 154 MB, made by the loader's prefetch thread and freed by the training loop's): they go
// to the shared cache, where the thread that allocates them finds them.
constexpr size_t kLargestPerThreadBlock = size_t{32} << 20;

// Blocks no thread holds: those of threads that have ended. Leaked on purpose: tensors in
// static objects may be freed after it would be destroyed.
struct SharedCache {
  std::mutex mutex;
  FreeBlocks free_blocks;
};
SharedCache& shared_cache() {
  static auto* instance = new SharedCache;
  return *instance;
}

// Each thread reuses the blocks it freed itself. Device threads free their activations on
// their own core, so a block handed out again is still in that core's caches; from a
// shared list, one device would get the other's block and pull every line of it across
// cores (measured: LeNet's 6.9 MB conv1 output took 2.4x as long to write in evaluation).
// A thread's blocks go to the shared cache when it ends.
struct ThreadCache {
  FreeBlocks free_blocks;
  ~ThreadCache() {
    SharedCache& shared = shared_cache();
    std::lock_guard lock(shared.mutex);
    for (auto& [size, blocks] : free_blocks) {
      auto& into = shared.free_blocks[size];
      into.insert(into.end(), blocks.begin(), blocks.end());
    }
  }
};
ThreadCache& thread_cache() {
  thread_local ThreadCache cache;
  return cache;
}

std::atomic<int64_t> blocks_from_system{0};

void* pop(FreeBlocks& blocks, size_t size) {
  auto found = blocks.find(size);
  if (found == blocks.end() || found->second.empty()) return nullptr;
  void* block = found->second.back();
  found->second.pop_back();
  return block;
}
}  // namespace

void* allocate_host(size_t bytes) {
  const size_t size = bucket_size(bytes);
  if (void* block = pop(thread_cache().free_blocks, size)) return block;
  {
    SharedCache& shared = shared_cache();
    std::lock_guard lock(shared.mutex);
    if (void* block = pop(shared.free_blocks, size)) return block;
  }
  void* block = std::aligned_alloc(64, size);
  if (!block) throw std::bad_alloc();
  blocks_from_system.fetch_add(1, std::memory_order_relaxed);
  return block;
}

int64_t host_blocks_from_system() { return blocks_from_system.load(std::memory_order_relaxed); }

void release_host(void* block, size_t bytes) {
  if (!block) return;
  const size_t size = bucket_size(bytes);
  if (size <= kLargestPerThreadBlock) {
    std::vector<void*>& own = thread_cache().free_blocks[size];
    if (own.size() < kBlocksKeptPerThread) {
      own.push_back(block);
      return;
    }
  }
  // A thread that frees more blocks of a size than it reuses (tensors another thread made)
  // passes the rest on, so the thread that allocates them finds them in the shared cache.
  SharedCache& shared = shared_cache();
  std::lock_guard lock(shared.mutex);
  shared.free_blocks[size].push_back(block);
}

}  // namespace dpt
