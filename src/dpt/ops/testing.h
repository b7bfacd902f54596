// Test-only switches of the ops layer, for tests and benchmarks that compare a fast path
// with the reference it must equal; not installed with the library. A run's own choices
// (precision, conv algorithm, the fusion pass) are its ops::ExecutionOptions instead.
#pragma once

namespace dpt::ops {

// Off: Backend::fused() is null everywhere and every op composes the reference ops
// (ops/fused_kernels.h). Process-wide; set it while no kernel runs.
void set_fused_kernels(bool on);

}  // namespace dpt::ops
