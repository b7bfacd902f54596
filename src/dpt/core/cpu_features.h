// Loops that vectorize to 512-bit registers are compiled twice, for AVX-512 and for the
// baseline x86-64, and pick one at run time:
//
//   DPT_AVX512_VARIANT void add_avx512(...) { add_body(...); }   // body: an inline function
//   void add_portable(...) { add_body(...); }
//   void add(...) { cpu_has_avx512f() ? add_avx512(...) : add_portable(...); }
//
// rather than with GCC's target_clones, whose ifunc resolvers run while the program is
// being relocated, before ThreadSanitizer's runtime is up: instrumented, they crash every
// TSan test binary at start.
#pragma once

#define DPT_AVX512_VARIANT __attribute__((target("avx512f")))
// For the shared body, so that each variant compiles its own copy for its own target.
#define DPT_INLINE_BODY inline __attribute__((always_inline))

namespace dpt {

// Whether this CPU runs AVX-512 Foundation instructions (checked once).
bool cpu_has_avx512f();

}  // namespace dpt
