#include "dpt/parallel/compression.h"

#include "dpt/parallel/sharded_collectives.h"

namespace dpt::parallel {

void bf16_allreduce_sum(Communicator& comm, int rank, float* data, size_t count) {
  if (comm.size() == 1) return;
  reduce_scatter_sum(comm, rank, data, count, Compression::bf16);
  all_gather(comm, rank, data, count, Compression::bf16);
}

}  // namespace dpt::parallel
