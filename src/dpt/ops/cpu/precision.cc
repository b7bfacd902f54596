#include "dpt/ops/precision.h"

#include <atomic>
#include <dnnl.hpp>
#include <stdexcept>

#include "dpt/core/config_error.h"

namespace dpt::ops {

namespace {
const ExecutionOptions kDefaults{};
thread_local const ExecutionOptions* t_current = &kDefaults;
}  // namespace

bool cpu_has_bf16() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  return (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

void check_execution(const ExecutionOptions& options) {
  if (options.precision == ConvPrecision::bf16 && !cpu_has_bf16()) {
    throw ConfigError("precision",
                      "`precision` bf16 needs a CPU with avx512_bf16 (native bfloat16 dot products), which this one "
                      "lacks; use `precision` fp32");
  }
}

const ExecutionOptions& execution() { return *t_current; }

ExecutionScope::ExecutionScope(const ExecutionOptions& options) : options_(options), previous_(t_current) {
  check_execution(options_);
  t_current = &options_;
}

ExecutionScope::~ExecutionScope() { t_current = previous_; }

ConvPrecision parse_conv_precision(std::string_view text) {
  if (text == "fp32") return ConvPrecision::fp32;
  if (text == "bf16") return ConvPrecision::bf16;
  throw bad_choice("precision", text, kConvPrecisions);
}

std::string precision_name(ConvPrecision precision) { return precision == ConvPrecision::bf16 ? "bf16" : "fp32"; }

ConvAlgorithm parse_conv_algorithm(std::string_view text) {
  if (text == "winograd") return ConvAlgorithm::winograd;
  if (text == "direct") return ConvAlgorithm::direct;
  throw bad_choice("conv_algorithm", text, kConvAlgorithms);
}

}  // namespace dpt::ops
