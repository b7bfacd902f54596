// Host memory for tensors. Training allocates the same sizes step after step; returning
// those blocks to the system and asking again costs a page fault per 4 KiB on every
// step (large blocks are mmap'ed fresh each time). So freed blocks are kept, by size,
// and handed out again: after the first step, training allocates nothing new. Each thread
// first reuses the blocks it freed itself (see allocator.cc for why).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dpt {

// 64-byte aligned block of at least `bytes`; never null (throws std::bad_alloc).
void* allocate_host(size_t bytes);
// Returns a block from allocate_host(bytes) to the cache.
void release_host(void* block, size_t bytes);
// How many blocks allocate_host has taken from the system (not from the cache) in this
// process so far: constant once training has settled (tests/train_steady_state_test.cc).
int64_t host_blocks_from_system();

}  // namespace dpt
