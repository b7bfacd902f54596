#include "dpt/ops/precision.h"

#include <atomic>
#include <dnnl.hpp>
#include <stdexcept>

#include "dpt/core/config_error.h"

namespace dpt::ops {

namespace {
// Read by every device thread at each convolution; set once before training starts.
std::atomic<ConvPrecision> g_precision{ConvPrecision::fp32};
std::atomic<ConvAlgorithm> g_algorithm{ConvAlgorithm::winograd};
std::atomic<int> g_deterministic_holders{0};
}  // namespace

bool cpu_has_bf16() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  return (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

void set_conv_precision(ConvPrecision precision) {
  if (precision == ConvPrecision::bf16 && !cpu_has_bf16()) {
    throw ConfigError("precision",
                      "`precision` bf16 needs a CPU with avx512_bf16 (native bfloat16 dot products), which this one "
                      "lacks; use `precision` fp32");
  }
  g_precision.store(precision);
}

ConvPrecision conv_precision() { return g_precision.load(std::memory_order_relaxed); }

ConvPrecision parse_conv_precision(std::string_view text) {
  if (text == "fp32") return ConvPrecision::fp32;
  if (text == "bf16") return ConvPrecision::bf16;
  throw bad_choice("precision", text, kConvPrecisions);
}

std::string precision_name(ConvPrecision precision) { return precision == ConvPrecision::bf16 ? "bf16" : "fp32"; }

void set_conv_algorithm(ConvAlgorithm algorithm) { g_algorithm.store(algorithm); }

bool conv_deterministic() { return g_deterministic_holders.load(std::memory_order_relaxed) > 0; }
DeterministicConvolutions::DeterministicConvolutions() { g_deterministic_holders.fetch_add(1); }
DeterministicConvolutions::~DeterministicConvolutions() { g_deterministic_holders.fetch_sub(1); }

ConvAlgorithm conv_algorithm() { return g_algorithm.load(std::memory_order_relaxed); }

ConvAlgorithm parse_conv_algorithm(std::string_view text) {
  if (text == "winograd") return ConvAlgorithm::winograd;
  if (text == "direct") return ConvAlgorithm::direct;
  throw bad_choice("conv_algorithm", text, kConvAlgorithms);
}

}  // namespace dpt::ops
