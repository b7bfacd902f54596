// Tensors keep the plain layout PyTorch users expect (NCHW, OIHW) between ops, but
// oneDNN's fast kernels want blocked layouts (e.g. nChw8c: channels in groups of 8, so one
// SIMD load covers 8 channels). Kernels ask the primitive which layout it wants and
// bridge here: a reorder into a scratch buffer on the way in, and back on the way out.
// In plain NCHW oneDNN 2.6 falls back to reference pooling and im2col convolution, which
// cost far more than these reorders.
#pragma once

#include <dnnl.hpp>

#include "dpt/core/tensor.h"

namespace dpt::ops::cpu {

// oneDNN memory for a tensor's data in the layout `wanted`: the tensor's own storage when
// its plain layout already is `wanted`, else a reordered copy that lives in `scratch`.
dnnl::memory input_in_layout(const Tensor& tensor, const dnnl::memory::desc& plain,
                             const dnnl::memory::desc& wanted, Tensor& scratch);

// Memory in the layout `wanted` for a primitive to write an output into: the output
// tensor's own storage when the layouts agree, else a scratch buffer that
// finish_output() reorders into the tensor.
dnnl::memory output_in_layout(const Tensor& output, const dnnl::memory::desc& plain,
                              const dnnl::memory::desc& wanted, Tensor& scratch);
void finish_output(const dnnl::memory& written, const Tensor& output, const dnnl::memory::desc& plain);

// An uninitialised buffer big enough for `desc` (from the caching allocator).
Tensor scratch_buffer(const dnnl::memory::desc& desc);

// The blocked activation layout the pooling kernels run in.
dnnl::memory::format_tag blocked_activation_tag();

}  // namespace dpt::ops::cpu
