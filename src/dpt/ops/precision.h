// The arithmetic the convolutions use, for the whole process. fp32 (the default) is
// float32 throughout. bf16 rounds a convolution's inputs and weights (forward), or its
// upstream gradient and weights / inputs (backward), to bfloat16 as it reads them, and
// multiplies them with fp32 accumulation into fp32 outputs: CPUs with avx512_bf16 run
// those products twice as fast. Parameters, gradients, activations between ops and the
// SGD update stay fp32; only the convolutions' products are rounded (8 significant bits).
// Convolutions of a single-channel input (LeNet's conv1) stay fp32 on CPUs with our own
// kernels for them (ops/cpu/single_channel_conv.cc): with 9 products per output they are
// bound by memory, not by the multiplies, and run faster in those kernels than in bf16.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace dpt::ops {

enum class ConvPrecision { fp32, bf16 };
inline constexpr std::array<std::string_view, 2> kConvPrecisions{"fp32", "bf16"};  // by name

// Throws ConfigError (`precision`) for bf16 on a CPU without avx512_bf16 (oneDNN would emulate
// it more slowly than fp32), naming the CPU feature that is missing.
void set_conv_precision(ConvPrecision precision);
ConvPrecision conv_precision();

// "fp32" or "bf16"; anything else throws ConfigError (`precision`) listing the choices.
ConvPrecision parse_conv_precision(std::string_view text);
std::string precision_name(ConvPrecision precision);

// Whether this CPU (as oneDNN sees it) has native bf16 dot products.
bool cpu_has_bf16();

}  // namespace dpt::ops
