#include "dpt/parallel/ring_schedule.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace dpt::parallel {

namespace ring {

namespace {
// c mod n for c in (-2n, 2n): the chunk index of a neighbour's step.
int wrap(int c, int n) { return ((c % n) + n) % n; }
}  // namespace

Range chunk(int c, size_t count, int n) {
  const size_t parts = static_cast<size_t>(n), index = static_cast<size_t>(c);
  const size_t base = count / parts, extra = count % parts;
  const size_t begin = index * base + std::min(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

Step reduce_scatter_step(int rank, int step, int n, size_t count) {
  return {chunk(wrap(rank - step, n), count, n), chunk(wrap(rank - 1 - step, n), count, n)};
}

Step all_gather_step(int rank, int step, int n, size_t count) {
  return {chunk(wrap(rank + 1 - step, n), count, n), chunk(wrap(rank - step, n), count, n)};
}

}  // namespace ring

namespace {

template <class T, class Combine>
void combine_each(void* dst, const void* src, size_t count, Combine combine) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  for (size_t i = 0; i < count; ++i) d[i] = combine(d[i], s[i]);
}

template <class T>
void reduce_typed(void* dst, const void* src, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      if constexpr (std::is_integral_v<T>) {
        // Through unsigned: wraps around instead of signed overflow (undefined behaviour).
        using U = std::make_unsigned_t<T>;
        return combine_each<T>(dst, src, count,
                               [](T a, T b) { return static_cast<T>(static_cast<U>(a) + static_cast<U>(b)); });
      } else {
        return combine_each<T>(dst, src, count, [](T a, T b) { return a + b; });
      }
    case ReduceOp::max: return combine_each<T>(dst, src, count, [](T a, T b) { return b > a ? b : a; });
    case ReduceOp::min: return combine_each<T>(dst, src, count, [](T a, T b) { return b < a ? b : a; });
  }
  throw std::invalid_argument("reduce_into: unknown ReduceOp " + std::to_string(static_cast<int>(op)));
}

}  // namespace

void reduce_into(void* dst, const void* src, size_t count, DType type, ReduceOp op) {
  switch (type) {
    case DType::f32: return reduce_typed<float>(dst, src, count, op);
    case DType::i64: return reduce_typed<int64_t>(dst, src, count, op);
    case DType::bf16: break;  // a wire format: compression.h sums its values in float
  }
  throw std::invalid_argument("reduce_into: unknown DType " + std::to_string(static_cast<int>(type)));
}

}  // namespace dpt::parallel
