#include "dpt/ops/cpu/dnnl_context.h"

#include <atomic>

namespace dpt::ops::cpu {

dnnl::engine& engine() {
  static dnnl::engine cpu_engine(dnnl::engine::kind::cpu, 0);
  return cpu_engine;
}

dnnl::stream& stream() {
  thread_local dnnl::stream thread_stream(engine());
  return thread_stream;
}

dnnl::memory::dims to_dims(const Shape& shape) { return dnnl::memory::dims(shape.begin(), shape.end()); }

dnnl::memory::desc plain_desc(const Shape& shape, dnnl::memory::format_tag tag) {
  return dnnl::memory::desc(to_dims(shape), dnnl::memory::data_type::f32, tag);
}

dnnl::memory as_memory(const dnnl::memory::desc& desc, const Tensor& tensor) {
  return dnnl::memory(desc, engine(), tensor.data<float>());
}

namespace {
std::atomic<int64_t> slots_made{0};
}  // namespace

std::shared_ptr<void>& primitive_cache_slot(const std::string& key) {
  thread_local std::unordered_map<std::string, std::shared_ptr<void>> cache;
  const auto [slot, made] = cache.try_emplace(key);
  if (made) slots_made.fetch_add(1, std::memory_order_relaxed);
  return slot->second;
}

int64_t primitives_built() { return slots_made.load(std::memory_order_relaxed); }

}  // namespace dpt::ops::cpu
