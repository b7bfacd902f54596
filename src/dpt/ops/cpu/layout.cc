#include "dpt/ops/cpu/layout.h"

#include <cstring>
#include <string>

#include "dpt/ops/cpu/dnnl_context.h"

namespace dpt::ops::cpu {

namespace {
// Memory descriptors are plain structs: their bytes identify a layout exactly.
std::string desc_key(const dnnl::memory::desc& desc) {
  return std::string(reinterpret_cast<const char*>(&desc.data), sizeof(desc.data));
}

void reorder(const dnnl::memory& from, const dnnl::memory& to) {
  const std::string key = "reorder|" + desc_key(from.get_desc()) + "|" + desc_key(to.get_desc());
  auto& primitive = cached<dnnl::reorder>(key, [&] { return dnnl::reorder(from, to); });
  primitive.execute(stream(), const_cast<dnnl::memory&>(from), const_cast<dnnl::memory&>(to));
}
}  // namespace

Tensor scratch_buffer(const dnnl::memory::desc& desc) {
  const int64_t floats = static_cast<int64_t>((desc.get_size() + sizeof(float) - 1) / sizeof(float));
  return Tensor::empty({floats});
}

dnnl::memory input_in_layout(const Tensor& tensor, const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted,
                             Tensor& scratch) {
  dnnl::memory own = as_memory(plain, tensor);
  if (wanted == plain) return own;
  scratch = scratch_buffer(wanted);
  dnnl::memory converted(wanted, engine(), scratch.data<float>());
  reorder(own, converted);
  return converted;
}

dnnl::memory output_in_layout(const Tensor& output, const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted,
                              Tensor& scratch) {
  if (wanted == plain) return as_memory(plain, output);
  scratch = scratch_buffer(wanted);
  return dnnl::memory(wanted, engine(), scratch.data<float>());
}

void finish_output(const dnnl::memory& written, const Tensor& output, const dnnl::memory::desc& plain) {
  if (written.get_desc() == plain) return;
  reorder(written, as_memory(plain, output));
}

dnnl::memory::format_tag blocked_activation_tag() { return dnnl::memory::format_tag::nChw8c; }

}  // namespace dpt::ops::cpu
