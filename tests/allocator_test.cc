// The host block cache: a thread gets back the blocks it freed itself (still in its core's
// caches), blocks of ended threads and a thread's surplus go to the shared cache, and so
// steady training allocates nothing new however tensors move between threads.
#include "dpt/core/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <thread>
#include <vector>

namespace {

using dpt::allocate_host;
using dpt::release_host;

// A size no other test in this process uses, so the cache holds only this test's blocks.
constexpr size_t kBytes = 7 * 4096 + 123;

std::vector<void*> allocate(size_t count, size_t bytes) {
  std::vector<void*> blocks;
  for (size_t i = 0; i < count; ++i) blocks.push_back(allocate_host(bytes));
  return blocks;
}

TEST(HostAllocator, AThreadGetsBackTheBlockItFreedLast) {
  void* first = allocate_host(kBytes);
  void* second = allocate_host(kBytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  release_host(first, kBytes);
  release_host(second, kBytes);
  EXPECT_EQ(allocate_host(kBytes), second);
  EXPECT_EQ(allocate_host(kBytes), first);
  release_host(first, kBytes);
  release_host(second, kBytes);
}

// Two devices freeing at the same time: each gets its own block back, not the one the
// other freed last (with one shared list it would, and would write into the other core's lines).
TEST(HostAllocator, AThreadDoesNotTakeTheBlockAnotherThreadJustFreed) {
  const size_t bytes = kBytes + 3 * 4096;
  void* mine = allocate_host(bytes);
  release_host(mine, bytes);
  void* theirs = nullptr;
  bool other_got_its_own = false;
  std::thread other([&] {
    theirs = allocate_host(bytes);
    release_host(theirs, bytes);  // freed after mine
    other_got_its_own = allocate_host(bytes) == theirs;
    release_host(theirs, bytes);
  });
  other.join();  // its block went to the shared cache as it ended; this thread takes its own first
  EXPECT_TRUE(other_got_its_own);
  EXPECT_NE(theirs, mine);
  EXPECT_EQ(allocate_host(bytes), mine);
  release_host(mine, bytes);
}

TEST(HostAllocator, BlocksOfAnEndedThreadServeTheOthers) {
  const size_t bytes = kBytes + 4096;
  std::vector<void*> made;
  std::thread([&] {
    made = allocate(3, bytes);
    for (void* block : made) release_host(block, bytes);
  }).join();
  const std::vector<void*> again = allocate(3, bytes);
  EXPECT_EQ(std::set<void*>(again.begin(), again.end()), std::set<void*>(made.begin(), made.end()));
  for (void* block : again) release_host(block, bytes);
}

// Thread B frees 40 blocks that thread A made (as a device frees what the loader's thread
// allocated): B keeps 16 for itself and passes 24 on, which A then reuses.
TEST(HostAllocator, AThreadPassesOnTheBlocksItFreesBeyondItsOwnNeed) {
  const size_t bytes = kBytes + 2 * 4096;
  const std::vector<void*> made = allocate(40, bytes);
  std::vector<void*> kept_by_b;
  std::thread b([&] {
    for (void* block : made) release_host(block, bytes);
    kept_by_b = allocate(16, bytes);  // its own 16, before it ends
  });
  b.join();
  const std::vector<void*> reused = allocate(24, bytes);
  std::set<void*> all(made.begin(), made.end());
  for (void* block : reused) EXPECT_TRUE(all.count(block)) << "a new block while 24 freed ones were waiting";
  for (void* block : kept_by_b) EXPECT_TRUE(all.count(block));
  std::set<void*> distinct(reused.begin(), reused.end());
  distinct.insert(kept_by_b.begin(), kept_by_b.end());
  EXPECT_EQ(distinct.size(), 40u);
  for (void* block : reused) release_host(block, bytes);
  for (void* block : kept_by_b) release_host(block, bytes);
}

}  // namespace
