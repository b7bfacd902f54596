// runtime.h over the CUDA runtime: device discovery, a caching allocator per GPU, copies.
#include "dpt/cuda/runtime.h"

#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "dpt/cuda/context.h"

namespace dpt::cuda {

namespace {
struct Discovery {
  int count = 0;
  std::string reason;  // why count is 0
};

// Asked once: the answer cannot change while the process runs.
const Discovery& discovery() {
  static const Discovery found = [] {
    Discovery d;
    const cudaError_t status = cudaGetDeviceCount(&d.count);
    if (status != cudaSuccess) {
      d.count = 0;
      d.reason = std::string("no usable CUDA GPU here (cudaGetDeviceCount: ") + cudaGetErrorString(status) + ")";
    } else if (d.count == 0) {
      d.reason = "no CUDA GPU here (cudaGetDeviceCount found 0)";
    }
    return d;
  }();
  return found;
}

// Freed blocks by rounded size, per device. Every kernel and copy on a device runs on its
// one stream, so a block released after its last use was queued can be handed to the next
// user at once: the stream runs that user's work after the last use.
class BlockCache {
 public:
  void* take(int device, size_t bytes) {
    {
      std::lock_guard lock(mutex_);
      auto& blocks = free_[key(device, bytes)];
      if (!blocks.empty()) {
        void* block = blocks.back();
        blocks.pop_back();
        return block;
      }
    }
    context(device);  // makes the device current
    void* block = nullptr;
    cudaError_t status = cudaMalloc(&block, bytes);
    if (status == cudaErrorMemoryAllocation) {
      // Clear the out-of-memory error, and only that one: cudaGetLastError would also
      // swallow another error pending on this thread (a failed launch nobody checked),
      // which must still be reported. Then give the cached blocks back and try once more.
      if (cudaPeekAtLastError() == cudaErrorMemoryAllocation) (void)cudaGetLastError();
      free_all(device);
      status = cudaMalloc(&block, bytes);
      if (status == cudaErrorMemoryAllocation && cudaPeekAtLastError() == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // reported below by check(); the next launch must not see it
      }
    }
    check(status, ("cudaMalloc of " + std::to_string(bytes) + " bytes on cuda:" + std::to_string(device)).c_str());
    return block;
  }
  void give(int device, void* block, size_t bytes) {
    std::lock_guard lock(mutex_);
    free_[key(device, bytes)].push_back(block);
  }

 private:
  static std::pair<int, size_t> key(int device, size_t bytes) { return {device, bytes}; }
  struct Hash {
    size_t operator()(const std::pair<int, size_t>& k) const {
      return std::hash<size_t>()(k.second) ^ (static_cast<size_t>(k.first) << 56);
    }
  };
  void free_all(int device) {
    synchronize(device);
    std::lock_guard lock(mutex_);
    for (auto& [k, blocks] : free_) {
      if (k.first != device) continue;
      for (void* block : blocks) cudaFree(block);
      blocks.clear();
    }
  }
  std::mutex mutex_;
  std::unordered_map<std::pair<int, size_t>, std::vector<void*>, Hash> free_;
};

BlockCache& cache() {
  static BlockCache* blocks = new BlockCache;  // never destroyed: tensors may outlive statics
  return *blocks;
}

// Sizes rounded up to 512 bytes, so that nearby sizes share blocks (and alignment suits
// every vector access the kernels make).
size_t rounded(size_t bytes) { return (bytes + 511) / 512 * 512; }
}  // namespace

bool built_with_cuda() { return true; }
int device_count() { return discovery().count; }
std::string unavailable_reason() { return discovery().reason; }

void require_device(Device device) {
  if (device.kind != Device::Kind::cuda) throw std::invalid_argument(device.str() + " is not a CUDA device");
  const Discovery& d = discovery();
  if (d.count == 0) throw std::invalid_argument(device.str() + ": " + d.reason);
  if (device.index >= d.count) {
    throw std::invalid_argument(device.str() + ": this machine has " + std::to_string(d.count) + " CUDA GPU" +
                                (d.count == 1 ? "" : "s") + " (cuda:0 to cuda:" + std::to_string(d.count - 1) + ")");
  }
}

void* allocate(int device, size_t bytes) {
  require_device(Device{Device::Kind::cuda, device});
  return cache().take(device, rounded(bytes == 0 ? 1 : bytes));
}
void release(int device, void* block, size_t bytes) { cache().give(device, block, rounded(bytes == 0 ? 1 : bytes)); }

void copy_to_host(int device, void* host, const void* src, size_t bytes) {
  Context& ctx = context(device);
  check(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, ctx.stream), "cudaMemcpy to host");
  check(cudaStreamSynchronize(ctx.stream), "copy to host");
}

namespace {
// Pinned host memory that a host-to-device copy reads from, and the event that says the
// stream has read it.
struct StagingSlot {
  void* pinned = nullptr;
  size_t bytes = 0;
  cudaEvent_t read = nullptr;
};
struct Staging {
  std::mutex mutex;
  StagingSlot slots[2];  // two: a batch is staged while the stream may still read the last
  int next = 0;
};
// Larger copies (weights at start-up) go straight from pageable memory, synchronously,
// rather than pinning that much host memory for good.
constexpr size_t kMaxStaged = size_t{64} << 20;

Staging& staging(int device) {
  static std::mutex mutex;
  static std::unordered_map<int, Staging*> per_device;  // never freed: outlives every tensor
  std::lock_guard lock(mutex);
  Staging*& s = per_device[device];
  if (!s) s = new Staging;
  return *s;
}
}  // namespace

void copy_from_host(int device, void* dst, const void* host, size_t bytes) {
  if (bytes == 0) return;
  Context& ctx = context(device);
  if (bytes > kMaxStaged) {
    check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, ctx.stream), "cudaMemcpy from host");
    check(cudaStreamSynchronize(ctx.stream), "copy from host");
    return;
  }
  Staging& s = staging(device);
  std::lock_guard lock(s.mutex);
  StagingSlot& slot = s.slots[s.next];
  s.next ^= 1;
  if (slot.read) {
    check(cudaEventSynchronize(slot.read), "waiting for a staging buffer");  // its last copy has run
  } else {
    check(cudaEventCreateWithFlags(&slot.read, cudaEventDisableTiming), "cudaEventCreate");
  }
  if (slot.bytes < bytes) {
    if (slot.pinned) check(cudaFreeHost(slot.pinned), "cudaFreeHost");
    slot.pinned = nullptr;
    check(cudaHostAlloc(&slot.pinned, bytes, cudaHostAllocDefault), "cudaHostAlloc");
    slot.bytes = bytes;
  }
  std::memcpy(slot.pinned, host, bytes);
  check(cudaMemcpyAsync(dst, slot.pinned, bytes, cudaMemcpyHostToDevice, ctx.stream), "cudaMemcpy from host");
  check(cudaEventRecord(slot.read, ctx.stream), "cudaEventRecord");
}

void copy_on_device(int device, void* dst, const void* src, size_t bytes) {
  Context& ctx = context(device);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx.stream), "cudaMemcpy on device");
}

void copy_between_devices(int dst_device, void* dst, int src_device, const void* src, size_t bytes) {
  synchronize(src_device);  // the source's last writes are queued on its own stream
  Context& ctx = context(dst_device);
  check(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, ctx.stream), "cudaMemcpyPeer");
  check(cudaStreamSynchronize(ctx.stream), "copy between devices");
}

void fill_zero(int device, void* dst, size_t bytes) {
  Context& ctx = context(device);
  check(cudaMemsetAsync(dst, 0, bytes, ctx.stream), "cudaMemset");
}

void synchronize(int device) { check(cudaStreamSynchronize(context(device).stream), "cudaStreamSynchronize"); }

}  // namespace dpt::cuda
