// What every oneDNN kernel needs: the CPU engine, a stream for the calling thread, and a
// per-thread cache of primitives. Creating a oneDNN primitive JIT-compiles code (tens of
// microseconds to milliseconds), so kernels build each one once per shape and reuse it;
// in the training loop no primitive is ever created after the first step.
#pragma once

#include <dnnl.hpp>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>

#include "dpt/core/tensor.h"

namespace dpt::ops::cpu {

dnnl::engine& engine();
dnnl::stream& stream();  // one per thread: each device worker submits to its own

dnnl::memory::dims to_dims(const Shape& shape);

// A plain (row-major) f32 memory descriptor of `shape` with the given format tag.
dnnl::memory::desc plain_desc(const Shape& shape, dnnl::memory::format_tag tag);

// Wraps a tensor's storage as oneDNN memory without copying.
dnnl::memory as_memory(const dnnl::memory::desc& desc, const Tensor& tensor);

inline void append_key_part(std::ostringstream& out, const Shape& shape) { out << shape_str(shape); }
template <class Scalar>
void append_key_part(std::ostringstream& out, const Scalar& value) {
  out << value;
}

// Builds a cache key from an op name and its shapes and scalar parameters.
template <class... Parts>
std::string cache_key(const char* op, const Parts&... parts) {
  std::ostringstream out;
  out << op;
  ((out << '|', append_key_part(out, parts)), ...);
  return out.str();
}

// The thread's primitive cache slot for `key`; empty the first time.
std::shared_ptr<void>& primitive_cache_slot(const std::string& key);
// How many slots every thread's cache has made so far (each one built a primitive or a
// reorder): constant once training has settled (tests/train_steady_state_test.cc).
int64_t primitives_built();

// Returns the cached object for `key`, building it with make() on first use.
template <class T, class Make>
T& cached(const std::string& key, Make&& make) {
  std::shared_ptr<void>& slot = primitive_cache_slot(key);
  if (!slot) slot = std::make_shared<T>(make());
  return *static_cast<T*>(slot.get());
}

}  // namespace dpt::ops::cpu
