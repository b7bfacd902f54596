// Collective communication between the ranks of a data-parallel job (one rank per device).
// Every rank calls each collective with its own buffer, as with NCCL and MPI, so training
// code is the same whether the ranks are threads of one process (the in-process backends
// here) or processes on many machines (MPI and NCCL backends implement this interface).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dpt/core/device.h"
#include "dpt/core/dtype.h"

namespace dpt::parallel {

// Thrown in every rank blocked in a collective when another rank failed (see abort()).
class CollectiveAborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How allreduce combines the ranks' elements (PyTorch c10d's ReduceOp): sum (i64 wraps
// around on overflow, as two's complement), max or min.
enum class ReduceOp { sum, max, min };
const char* reduce_op_name(ReduceOp op);  // "sum", "max", "min"

// How a float sum's values travel between the ranks (PyTorch DDP's compression hooks):
// as they are (none), or rounded to bfloat16 (bf16), half the bytes (compression.h).
enum class Compression { none, bf16 };
inline constexpr std::array<std::string_view, 2> kCompressions{"none", "bf16"};
const char* compression_name(Compression compression);  // "none", "bf16"
// Throws ConfigError (key `grad_compression`) for a name other than none or bf16.
Compression parse_compression(std::string_view name);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int size() const = 0;
  virtual std::string name() const = 0;

  // Whether `data` in the collectives is device memory on the rank's GPU (NCCL), rather
  // than host memory (every other backend).
  virtual bool reduces_device_memory() const { return false; }
  // On return, data[0..count) (elements of `type`) of every rank holds the elementwise `op`
  // over all ranks, the same bits on every rank. Every rank must pass the same count, type
  // and op. (A device-memory backend queues the reduction on the rank's GPU stream and may
  // return before it has run: stream order keeps later uses after.)
  virtual void allreduce(int rank, void* data, size_t count, DType type, ReduceOp op) = 0;
  // On return every rank's data[0..count) (elements of `type`) equals that of `root`.
  virtual void broadcast(int rank, void* data, size_t count, DType type, int root) = 0;
  // Personalised all-to-all (MPI_Alltoallv): rank r's send[d] goes to rank d, which
  // receives it into its receive[r]. Both have size() blocks; both ends of a pair name the
  // same count (blocks may be empty); a rank's block to itself is copied. The blocks of one
  // call must not overlap. (--deterministic's tree allreduce, tree_allreduce.h, is built on it.)
  struct Block {
    void* data = nullptr;
    size_t count = 0;  // elements of the call's type
  };
  virtual void alltoall(int rank, const std::vector<Block>& send, const std::vector<Block>& receive, DType type) = 0;
  virtual void barrier(int rank) = 0;
  // A float sum, as allreduce(sum), whose values cross between the ranks as `compression`
  // says: none is allreduce itself; bf16 is compression.h's bf16_allreduce_sum, built on
  // alltoall (host memory only). A backend with two levels compresses only the one that
  // crosses the network (HierarchicalCommunicator).
  virtual void allreduce_compressed(int rank, float* data, size_t count, Compression compression);

  // Releases every rank waiting in a collective with CollectiveAborted, now and in every
  // later call: one failing rank must end the step everywhere, never hang it.
  virtual void abort(const std::string& reason) = 0;

  // Bytes this rank has read from its peers so far: the wire volume a networked backend
  // would send (ring: 2 (N-1)/N of the buffer per allreduce).
  virtual size_t bytes_received(int rank) const = 0;

  // Typed forms of the two above, so that callers name no DType. (A subclass that
  // overrides the virtuals brings these back into view with `using Communicator::allreduce;`.)
  void allreduce_sum(int rank, float* data, size_t count) { allreduce(rank, data, count, DType::f32, ReduceOp::sum); }
  void allreduce(int rank, float* data, size_t count, ReduceOp op) { allreduce(rank, data, count, DType::f32, op); }
  void allreduce(int rank, int64_t* data, size_t count, ReduceOp op) { allreduce(rank, data, count, DType::i64, op); }
  void broadcast(int rank, float* data, size_t count, int root) { broadcast(rank, data, count, DType::f32, root); }
  void broadcast(int rank, int64_t* data, size_t count, int root) { broadcast(rank, data, count, DType::i64, root); }
};

// Throws std::invalid_argument unless send and receive each have `size` blocks and
// `rank`'s block to itself fits its receive block: the check every backend's alltoall
// makes first.
void check_alltoall_blocks(const std::vector<Communicator::Block>& send,
                           const std::vector<Communicator::Block>& receive, int size, int rank);

// This process's place in a multi-process job (e.g. under mpirun; each process runs one or
// several devices): the communicator whose ranks are the job's processes, and this
// process's rank. The default, without a communicator, is one process whose devices are
// all the ranks.
struct ProcessGroup {
  std::shared_ptr<Communicator> comm;
  int rank = 0;

  bool distributed() const { return comm != nullptr; }
  int size() const { return comm ? comm->size() : 1; }
  bool is_root() const { return rank == 0; }
};

// In-process backends for ranks that are threads of this process:
//   "naive": the lesson's allreduce: rank 0 sums every buffer into its own, then every
//            rank copies the result back.
//   "ring":  reduce-scatter then all-gather over N chunks, each rank exchanging only with
//            its ring neighbour (the algorithm of NCCL and Horovod): each rank moves
//            2 (N-1)/N of the buffer whatever N is.
// Throws std::invalid_argument for another name.
std::unique_ptr<Communicator> make_in_process_communicator(std::string_view algorithm, int size);

// NCCL over the GPUs `devices` (all cuda:N, one rank each, in this process; ncclCommInitAll):
// collectives on device memory, each rank's queued on its GPU's stream. Throws
// std::runtime_error in a build without CUDA.
std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<Device>& devices);

}  // namespace dpt::parallel
