#include "dpt/ops/cpu/layout.h"

#include <atomic>
#include <stdexcept>
#include <string>

#include "dpt/ops/cpu/dnnl_context.h"

namespace dpt::ops::cpu {

// Memory descriptors are plain structs: their bytes identify a layout exactly.
std::string layout_key(const dnnl::memory::desc& desc) {
  return std::string(reinterpret_cast<const char*>(&desc.data), sizeof(desc.data));
}

namespace {

std::atomic<int64_t> reorders{0};
// force_activation_layout's tag; undef: the rule in conv_activation_tag.
std::atomic<int> forced_layout{static_cast<int>(dnnl::memory::format_tag::undef)};

dnnl::memory::format_tag forced() { return static_cast<dnnl::memory::format_tag>(forced_layout.load()); }

void reorder(const dnnl::memory& from, const dnnl::memory& to) {
  reorders.fetch_add(1, std::memory_order_relaxed);
  const std::string key = "reorder|" + layout_key(from.get_desc()) + "|" + layout_key(to.get_desc());
  auto& primitive = cached<dnnl::reorder>(key, [&] { return dnnl::reorder(from, to); });
  primitive.execute(stream(), const_cast<dnnl::memory&>(from), const_cast<dnnl::memory&>(to));
}

// A storage layout chosen by a oneDNN primitive.
class DnnlLayout final : public BackendLayout {
 public:
  DnnlLayout(dnnl::memory::desc blocked, dnnl::memory::desc plain) : blocked_(blocked), plain_(plain) {}
  const dnnl::memory::desc& blocked() const { return blocked_; }

  void to_plain(const void* blocked, void* plain) const override {
    reorder(dnnl::memory(blocked_, engine(), const_cast<void*>(blocked)), dnnl::memory(plain_, engine(), plain));
    stream().wait();
  }

 private:
  dnnl::memory::desc blocked_, plain_;
};

}  // namespace

dnnl::memory::format_tag activation_tag_of(const dnnl::memory::desc& desc) {
  using tag = dnnl::memory::format_tag;
  if (desc.dims().size() != 4 || desc.data_type() != dnnl::memory::data_type::f32) return tag::undef;
  for (const tag t : {tag::nchw, tag::nhwc, tag::nChw8c, tag::nChw16c}) {
    if (desc == dnnl::memory::desc(desc.dims(), dnnl::memory::data_type::f32, t)) return t;
  }
  return tag::undef;
}

bool same_bytes(const dnnl::memory::desc& a, const dnnl::memory::desc& b) {
  using tag = dnnl::memory::format_tag;
  if (a == b) return true;
  const tag ta = activation_tag_of(a), tb = activation_tag_of(b);
  if (ta == tag::undef || tb == tag::undef || a.dims() != b.dims()) return false;
  const dnnl::memory::dims& d = a.dims();
  const auto fills = [&](tag t) { return t == tag::nChw16c ? d[1] % 16 == 0 : t == tag::nChw8c ? d[1] % 8 == 0 : true; };
  return d[2] * d[3] == 1 && fills(ta) && fills(tb);
}

namespace {

Tensor scratch_buffer(const dnnl::memory::desc& desc) {
  const int64_t floats = static_cast<int64_t>((desc.get_size() + sizeof(float) - 1) / sizeof(float));
  return Tensor::empty({floats});
}
}  // namespace

dnnl::memory::desc current_layout(const Tensor& tensor, const dnnl::memory::desc& plain) {
  const auto* layout = dynamic_cast<const DnnlLayout*>(tensor.storage().layout());
  // A view whose shape differs from the one the layout was made for (a reshape) is read plain.
  if (layout && layout->blocked().dims() == plain.dims()) return layout->blocked();
  return plain;
}

dnnl::memory input_in_layout(const Tensor& tensor, const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted,
                             Tensor& scratch) {
  const dnnl::memory::desc current = current_layout(tensor, plain);
  Storage& storage = tensor.storage();
  void* data = current == plain ? storage.data(tensor.bytes()) : storage.raw_data();
  if (same_bytes(wanted, current)) return dnnl::memory(wanted, engine(), data);
  dnnl::memory own(current, engine(), data);
  scratch = scratch_buffer(wanted);
  dnnl::memory converted(wanted, engine(), scratch.data<float>());
  reorder(own, converted);
  return converted;
}

LaidOutTensor output_in_layout(const Shape& shape, const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted) {
  if (same_bytes(wanted, plain)) {  // a plain tensor, written through the primitive's descriptor
    Tensor t = Tensor::empty(shape);
    return {t, as_memory(wanted, t)};
  }
  Tensor t = Tensor::from_storage(
      std::make_shared<Storage>(wanted.get_size(), std::make_shared<DnnlLayout>(wanted, plain)), shape, DType::f32, {});
  dnnl::memory memory(wanted, engine(), t.storage().raw_data());
  return {t, memory};
}

dnnl::memory scratch_output(const Tensor& output, const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted,
                            Tensor& scratch) {
  if (same_bytes(wanted, plain)) return as_memory(wanted, output);
  scratch = scratch_buffer(wanted);
  return dnnl::memory(wanted, engine(), scratch.data<float>());
}

void finish_output(const dnnl::memory& written, const Tensor& output, const dnnl::memory::desc& plain) {
  if (same_bytes(written.get_desc(), plain)) return;
  reorder(written, as_memory(plain, output));
}

namespace {
bool has_avx512() {
  static const bool avx512 =
      (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  return avx512;
}
}  // namespace

int64_t reorder_count() { return reorders.load(std::memory_order_relaxed); }

void force_activation_layout(dnnl::memory::format_tag layout) {
  using tag = dnnl::memory::format_tag;
  if (layout != tag::undef && layout != tag::nchw && layout != tag::nhwc && layout != tag::nChw8c &&
      layout != tag::nChw16c)
    throw std::invalid_argument("force_activation_layout: not an activation layout");
  forced_layout.store(static_cast<int>(layout));
}

dnnl::memory::format_tag activation_layout_of(const Tensor& tensor) {
  return activation_tag_of(current_layout(tensor, plain_desc(tensor.shape(), dnnl::memory::format_tag::nchw)));
}

Tensor copy_in_layout(const Tensor& tensor, dnnl::memory::format_tag layout) {
  const dnnl::memory::desc plain = plain_desc(tensor.shape(), dnnl::memory::format_tag::nchw);
  const dnnl::memory::desc wanted(plain.dims(), dnnl::memory::data_type::f32, layout);
  const LaidOutTensor out = output_in_layout(tensor.shape(), plain, wanted);
  Tensor scratch;
  const dnnl::memory from = input_in_layout(tensor, plain, current_layout(tensor, plain), scratch);
  reorder(from, out.memory);
  stream().wait();
  return out.tensor;
}

dnnl::memory::format_tag blocked_activation_tag() {
  if (forced() != dnnl::memory::format_tag::undef) return forced();
  // The block the convolutions pick for their outputs: 16 channels (one 512-bit register)
  // where oneDNN runs its AVX-512 kernels, else 8. Pooling in the same block means no
  // reorder between a convolution, its ReLU and its pooling, forward or backward.
  return has_avx512() ? dnnl::memory::format_tag::nChw16c : dnnl::memory::format_tag::nChw8c;
}

dnnl::memory::format_tag conv_activation_tag(int64_t in_channels, int64_t out_channels) {
  // oneDNN 2.6's blocked kernels pad the channels to the 16-channel block: LeNet's conv2
  // (20 -> 50 channels) computes as 32 -> 64 and spends half its FMAs on zeros, and conv1's
  // output (20 channels) is stored as 32, so every pass over it (ReLU, pooling, their
  // backward, the reorder for conv2) moves 1.6x the bytes. In nhwc nothing is padded: the
  // forward runs as brgconv (brgemm), the backward passes as the nhwc jit kernels. One
  // thread, batch 128, forward / backward-data / backward-weights in ms:
  //   conv2 20->50 5x5   nChw16c 5.74 / 5.79 / 6.31   nhwc 3.39 / 4.48 / 3.45
  //   conv1 1->20 3x3    nChw16c 0.43 / -    / 0.45   nhwc 0.83 / -    / 1.09
  //   conv 64->64 3x3    nChw16c 8.51 / 8.44 / 8.63   nhwc 7.98 / 8.71 / 9.88  (batch 32)
  // conv1 alone is slower in nhwc, but the whole LeNet step is faster with it (its output's
  // passes shrink and the reorder before conv2 goes): bench/layer_roofline's kernels of one
  // step took 17.5 ms with conv1 blocked and 14.2 ms with it in nhwc. Channel counts that
  // fill the block (ResNet-18's 64...512) stay blocked.
  if (forced() != dnnl::memory::format_tag::undef) return forced();
  const bool partly_empty_block = (in_channels > 1 && in_channels % 16 != 0) || out_channels % 16 != 0;
  return has_avx512() && partly_empty_block ? dnnl::memory::format_tag::nhwc : dnnl::memory::format_tag::any;
}

dnnl::memory::desc channels_last_desc(const Shape& shape) {
  return dnnl::memory::desc(to_dims(shape), dnnl::memory::data_type::f32, dnnl::memory::format_tag::nhwc);
}

const float* channels_last_data(const Tensor& tensor, Tensor& scratch) {
  const dnnl::memory memory = input_in_layout(tensor, plain_desc(tensor.shape(), dnnl::memory::format_tag::nchw),
                                              channels_last_desc(tensor.shape()), scratch);
  stream().wait();
  return static_cast<const float*>(memory.get_data_handle());
}

LaidOutTensor channels_last_output(const Shape& shape) {
  return output_in_layout(shape, plain_desc(shape, dnnl::memory::format_tag::nchw), channels_last_desc(shape));
}

bool is_channels_last(const dnnl::memory::desc& desc) {
  return desc.dims().size() == 4 &&
         desc == dnnl::memory::desc(desc.dims(), desc.data_type(), dnnl::memory::format_tag::nhwc);
}

}  // namespace dpt::ops::cpu
