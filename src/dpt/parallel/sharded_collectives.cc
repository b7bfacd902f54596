#include "dpt/parallel/sharded_collectives.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "dpt/parallel/compression.h"

namespace dpt::parallel {

namespace {
// The values as they travel: floats as they are, or rounded to bfloat16 words.
struct Wire {
  Compression compression;
  DType type() const { return compression == Compression::bf16 ? DType::bf16 : DType::f32; }
  size_t bytes(size_t count) const { return count * dtype_size(type()); }
  void encode(const float* from, size_t count, std::byte* to) const {
    if (count == 0) return;  // `to` may be an empty vector's null data(), which memcpy may not take
    if (compression == Compression::none) {
      std::memcpy(to, from, count * sizeof(float));
      return;
    }
    for (size_t i = 0; i < count; ++i) {
      const uint16_t word = to_bf16(from[i]);
      std::memcpy(to + 2 * i, &word, 2);
    }
  }
  float decode(const std::byte* from, size_t i) const {
    if (compression == Compression::none) {
      float value = 0;
      std::memcpy(&value, from + 4 * i, sizeof value);
      return value;
    }
    uint16_t word = 0;
    std::memcpy(&word, from + 2 * i, 2);
    return from_bf16(word);
  }
};
}  // namespace

void reduce_scatter_sum(Communicator& comm, int rank, float* data, size_t count, Compression compression) {
  const int n = comm.size();
  const Wire wire{compression};
  const ring::Range mine = my_slice(comm, rank, count);
  std::vector<std::byte> out(wire.bytes(count)), in(wire.bytes(mine.size() * static_cast<size_t>(n)));
  wire.encode(data, count, out.data());
  std::vector<Communicator::Block> send(n), receive(n);
  for (int r = 0; r < n; ++r) {
    const ring::Range slice = ring::chunk(r, count, n);
    send[r] = {out.data() + wire.bytes(slice.begin), slice.size()};
    receive[r] = {in.data() + wire.bytes(static_cast<size_t>(r) * mine.size()), mine.size()};
  }
  comm.alltoall(rank, send, receive, wire.type());
  for (size_t i = 0; i < mine.size(); ++i) {
    float total = 0.0f;
    for (int r = 0; r < n; ++r) total += wire.decode(in.data(), static_cast<size_t>(r) * mine.size() + i);
    data[mine.begin + i] = total;
  }
}

void all_gather(Communicator& comm, int rank, float* data, size_t count, Compression compression) {
  const int n = comm.size();
  const Wire wire{compression};
  const ring::Range mine = my_slice(comm, rank, count);
  std::vector<std::byte> out(wire.bytes(mine.size())), in(wire.bytes(count));
  wire.encode(data + mine.begin, mine.size(), out.data());
  std::vector<Communicator::Block> send(n), receive(n);
  for (int r = 0; r < n; ++r) {
    const ring::Range slice = ring::chunk(r, count, n);
    send[r] = {out.data(), mine.size()};
    receive[r] = {in.data() + wire.bytes(slice.begin), slice.size()};
  }
  comm.alltoall(rank, send, receive, wire.type());
  for (size_t i = 0; i < count; ++i) data[i] = wire.decode(in.data(), i);
}

}  // namespace dpt::parallel
