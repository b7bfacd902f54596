#include "dpt/ops/cpu/dnnl_context.h"

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

std::shared_ptr<void>& primitive_cache_slot(const std::string& key) {
  thread_local std::unordered_map<std::string, std::shared_ptr<void>> cache;
  return cache[key];
}

}  // namespace dpt::ops::cpu
