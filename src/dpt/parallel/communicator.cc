// The definitions behind communicator.h that every backend shares.
#include "dpt/parallel/communicator.h"

#include "dpt/core/config_error.h"
#include "dpt/parallel/compression.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace dpt::parallel {

const char* compression_name(Compression compression) { return compression == Compression::bf16 ? "bf16" : "none"; }

Compression parse_compression(std::string_view name) {
  if (name == "none") return Compression::none;
  if (name == "bf16") return Compression::bf16;
  throw bad_choice("grad_compression", name, kCompressions);
}

void Communicator::allreduce_compressed(int rank, float* data, size_t count, Compression compression) {
  if (compression == Compression::none) return allreduce(rank, data, count, DType::f32, ReduceOp::sum);
  bf16_allreduce_sum(*this, rank, data, count);
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "?";
}

void check_alltoall_blocks(const std::vector<Communicator::Block>& send,
                           const std::vector<Communicator::Block>& receive, int size, int rank) {
  if (send.size() != static_cast<size_t>(size) || receive.size() != static_cast<size_t>(size)) {
    throw std::invalid_argument("alltoall needs one send and one receive block per rank (" + std::to_string(size) +
                                "), got " + std::to_string(send.size()) + " and " + std::to_string(receive.size()));
  }
  if (send[rank].count != receive[rank].count) {
    throw std::invalid_argument("alltoall: rank " + std::to_string(rank) + " sends itself " +
                                std::to_string(send[rank].count) + " elements into a block of " +
                                std::to_string(receive[rank].count));
  }
}

}  // namespace dpt::parallel
