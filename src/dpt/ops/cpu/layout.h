// Tensors can hold their data in the layout oneDNN's fast kernels want (nChw16c: channels
// in groups of 16, so that one SIMD load covers 16 channels; or nhwc, channels last and
// unpadded, where the channel count does not fill the groups). A kernel writes its
// activation output in the layout its primitive chose, and the next kernel reads it as
// is when it wants the same layout, so a chain conv -> relu -> pool -> conv reorders
// nothing. Where layouts differ, or a tensor is plain (inputs, weights, anything code
// outside the backend wrote), a cached reorder converts into a scratch buffer. Code
// outside the backend that reads a blocked tensor gets it converted to plain first (see
// Storage::data). In plain NCHW oneDNN 2.6 would run reference pooling and im2col
// convolutions, which cost far more than these reorders.
#pragma once

#include <dnnl.hpp>
#include <string>

#include "dpt/core/tensor.h"

namespace dpt::ops::cpu {

// oneDNN memory for a tensor's data in the layout `wanted`: the tensor's own storage when
// it already is in `wanted`, else a reordered copy that lives in `scratch`. `plain` is
// the tensor's plain layout (e.g. nchw of its shape).
dnnl::memory input_in_layout(const Tensor& tensor, const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted,
                             Tensor& scratch);

// A new tensor of `shape` whose storage is laid out as `wanted` (plain when `wanted`
// equals `plain`), and the oneDNN memory over it for a primitive to write.
struct LaidOutTensor {
  Tensor tensor;
  dnnl::memory memory;
};
LaidOutTensor output_in_layout(const Shape& shape, const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted);

// The layout a tensor's data has now: its backend layout, or `plain`.
dnnl::memory::desc current_layout(const Tensor& tensor, const dnnl::memory::desc& plain);

// The activation layout (nchw, nhwc, nChw8c or nChw16c) a 4-D f32 descriptor is, or undef.
dnnl::memory::format_tag activation_tag_of(const dnnl::memory::desc& desc);
// Whether two descriptors put every element at the same byte: equal ones, or activation
// layouts of a 1 x 1 plane whose channels fill the blocks (nchw, nhwc and the channel
// blocks all read n * C + c there), which therefore need no reorder between them.
bool same_bytes(const dnnl::memory::desc& a, const dnnl::memory::desc& b);

// For outputs that must end plain (weight gradients, which the optimizer reads): memory
// in `wanted` for the primitive to write, in `scratch` when it differs from `plain`;
// finish_output() then reorders into the tensor.
dnnl::memory scratch_output(const Tensor& output, const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted,
                            Tensor& scratch);
void finish_output(const dnnl::memory& written, const Tensor& output, const dnnl::memory::desc& plain);

// Bytes that identify a layout exactly, for primitive cache keys.
std::string layout_key(const dnnl::memory::desc& desc);

// The blocked activation layout the pooling kernels run in: nChw16c with AVX-512, else nChw8c.
dnnl::memory::format_tag blocked_activation_tag();

// The activation layout a convolution from `in_channels` to `out_channels` runs in: nhwc
// (channels innermost, unpadded) where either count would leave a 16-channel block partly
// empty on an AVX-512 machine (a single input plane aside), else `any` (the primitive's
// choice, a blocked layout). See layout.cc for the measurements behind the rule.
dnnl::memory::format_tag conv_activation_tag(int64_t in_channels, int64_t out_channels);

// Tests only: makes conv_activation_tag() and blocked_activation_tag() return `layout`
// (nchw, nhwc, nChw8c or nChw16c) on any machine, so that every activation layout the
// backend can run in is exercised (and checked against a reference) here; `undef` restores
// the rule. Our own AVX-512 kernels still run only on AVX-512 machines. Process-wide: set
// it while no other thread runs CPU kernels.
void force_activation_layout(dnnl::memory::format_tag layout);

// The 4-D layout a tensor's data has now, as a tag: nchw when plain, nhwc, nChw8c or
// nChw16c when a kernel left it so; `undef` for any other backend layout.
dnnl::memory::format_tag activation_layout_of(const Tensor& tensor);

// A copy of a 4-D tensor with its storage in `layout` (one of activation_layout_of's tags):
// what a kernel that ran in that layout would have left, for tests.
Tensor copy_in_layout(const Tensor& tensor, dnnl::memory::format_tag layout);

// How many reorders (layout conversions, including a blocked tensor converted to plain when
// code outside the backend reads it) this process has run: for benchmarks and tests that
// count what a step converts.
int64_t reorder_count();

// Whether add() and accumulate() (residual connections, a gradient summed from two paths)
// keep an activation in the backend layout it arrived in (true, the default) or read their
// operands plain as before 2026-12-04 (false): for benchmarks that compare both in one run.
void set_keep_activation_layouts(bool on);

// True when `desc` is the channels-last (nhwc) layout of its own dims.
bool is_channels_last(const dnnl::memory::desc& desc);

// The f32 channels-last (nhwc) layout of a 4-D shape: what our own kernels read and write.
dnnl::memory::desc channels_last_desc(const Shape& shape);
// A 4-D f32 tensor's values channels-last, for our own kernels to read: its own storage
// when it is already nhwc, else a reordered copy in `scratch` (the reorder has finished).
const float* channels_last_data(const Tensor& tensor, Tensor& scratch);
// A new 4-D f32 tensor of `shape` whose storage is channels-last, for our own kernels to
// write through `memory`.
LaidOutTensor channels_last_output(const Shape& shape);

}  // namespace dpt::ops::cpu
