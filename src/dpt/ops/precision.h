// How a run computes: its execution options, each run's own (no process-wide switch). The
// replica engine installs a run's options on its device threads (parallel::DevicePool), so
// two runs in one process may compute differently; code outside the engine gets the
// options of the innermost ExecutionScope on its thread, or the defaults.
//
// precision: the arithmetic the convolutions use. fp32 (the default) is
// float32 throughout. bf16 rounds a convolution's inputs and weights (forward), or its
// upstream gradient and weights / inputs (backward), to bfloat16 as it reads them, and
// multiplies them with fp32 accumulation into fp32 outputs: CPUs with avx512_bf16 run
// those products twice as fast. Parameters, gradients, activations between ops and the
// SGD update stay fp32; only the convolutions' products are rounded (8 significant bits).
// Convolutions of a single-channel input (LeNet's conv1) stay fp32 on CPUs with our own
// kernels for them (ops/cpu/single_channel_conv.cc): with 9 products per output they are
// bound by memory, not by the multiplies, and run faster in those kernels than in bf16.
//
// conv_algorithm: the algorithm of the CPU's 3x3 stride-1 convolutions. winograd (the
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
enum class ConvAlgorithm { winograd, direct };
inline constexpr std::array<std::string_view, 2> kConvAlgorithms{"winograd", "direct"};  // by name

struct ExecutionOptions {
  ConvPrecision precision = ConvPrecision::fp32;
  ConvAlgorithm conv_algorithm = ConvAlgorithm::winograd;
  // nn's fusion pass (nn/fusion.h); off, every layer runs as its own op: the reference the
  // fused network is compared with.
  bool fusion = true;
  // Convolutions that give the same bits for the same inputs on every run and device, as
  // --deterministic needs (parallel::ReplicaGroup sets it in that mode). The CPU's kernels
  // already do at a fixed thread count, which the mode fixes; on GPUs cuDNN's plans then
  // take only the algorithms cuDNN marks CUDNN_DETERMINISTIC (some backward-weights
  // algorithms add with atomics, in whatever order threads finish).
  bool deterministic = false;
};

// Throws ConfigError (`precision`) for bf16 on a CPU without avx512_bf16 (oneDNN would
// emulate it more slowly than fp32), naming the CPU feature that is missing.
void check_execution(const ExecutionOptions& options);

// The options this thread computes with: the innermost ExecutionScope's, else the defaults.
const ExecutionOptions& execution();

// Makes `options` this thread's for its lifetime (checked first: check_execution), then
// restores the previous ones. Scopes nest.
class ExecutionScope {
 public:
  explicit ExecutionScope(const ExecutionOptions& options);
  ~ExecutionScope();
  ExecutionScope(const ExecutionScope&) = delete;
  ExecutionScope& operator=(const ExecutionScope&) = delete;

 private:
  ExecutionOptions options_;
  const ExecutionOptions* previous_;
};

// This thread's options, one by one (what the kernels read).
inline ConvPrecision conv_precision() { return execution().precision; }
inline ConvAlgorithm conv_algorithm() { return execution().conv_algorithm; }
inline bool conv_deterministic() { return execution().deterministic; }

// "fp32" or "bf16"; anything else throws ConfigError (`precision`) listing the choices.
ConvPrecision parse_conv_precision(std::string_view text);
std::string precision_name(ConvPrecision precision);
// "winograd" or "direct"; anything else throws ConfigError (`conv_algorithm`) listing the choices.
ConvAlgorithm parse_conv_algorithm(std::string_view text);

// Whether this CPU (as oneDNN sees it) has native bf16 dot products.
bool cpu_has_bf16();

}  // namespace dpt::ops
