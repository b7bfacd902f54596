// The arithmetic the convolutions use, for the whole process. fp32 (the default) is
// float32 throughout. bf16 rounds a convolution's inputs and weights (forward), or its
// upstream gradient and weights / inputs (backward), to bfloat16 as it reads them, and
// multiplies them with fp32 accumulation into fp32 outputs: CPUs with avx512_bf16 run
// those products twice as fast. Parameters, gradients, activations between ops and the
// SGD update stay fp32; only the convolutions' products are rounded (8 significant bits).
// Convolutions of a single-channel input (LeNet's conv1) stay fp32 on CPUs with our own
// kernels for them (ops/cpu/single_channel_conv.cc): with 9 products per output they are
// bound by memory, not by the multiplies, and run faster in those kernels than in bf16.
//
// The algorithm of the CPU's 3x3 stride-1 convolutions, for the whole process. winograd (the
// default) computes them, in fp32 on 16-channel blocks (ResNet-18's 3x3 layers), with
// oneDNN's Winograd F(4x4, 3x3) kernels: a quarter of the multiplies, with a rounding
// error several times direct's (still far inside tests/ops_layout_sweep_test.cc's bound).
// direct computes every product as written. Convolutions Winograd does not fit (other
// shapes, strides, layouts, bf16, GPUs) are direct either way.
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

enum class ConvAlgorithm { winograd, direct };
inline constexpr std::array<std::string_view, 2> kConvAlgorithms{"winograd", "direct"};  // by name

void set_conv_algorithm(ConvAlgorithm algorithm);
ConvAlgorithm conv_algorithm();
// "winograd" or "direct"; anything else throws ConfigError (`conv_algorithm`) listing the choices.
ConvAlgorithm parse_conv_algorithm(std::string_view text);

// Whether a convolution must give the same bits for the same inputs on every run and
// device, as --deterministic needs: true while a DeterministicConvolutions lives
// (parallel::ReplicaGroup holds one in that mode). The CPU's kernels already do at a fixed
// thread count, which the mode fixes; on GPUs cuDNN's plans then take only the algorithms
// cuDNN marks CUDNN_DETERMINISTIC (some backward-weights algorithms add with atomics, in
// whatever order threads finish).
bool conv_deterministic();
class DeterministicConvolutions {
 public:
  DeterministicConvolutions();
  ~DeterministicConvolutions();
  DeterministicConvolutions(const DeterministicConvolutions&) = delete;
  DeterministicConvolutions& operator=(const DeterministicConvolutions&) = delete;
};

// Whether this CPU (as oneDNN sees it) has native bf16 dot products.
bool cpu_has_bf16();

}  // namespace dpt::ops
