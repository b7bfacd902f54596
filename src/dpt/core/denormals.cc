#include "dpt/core/denormals.h"

#include <omp.h>

#if defined(__x86_64__) || defined(__i386__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

namespace dpt {

namespace {
void set_mode() {
#if defined(__x86_64__) || defined(__i386__)
  _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
  _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
#endif
}
}  // namespace

void flush_denormals_on_this_thread() {
  set_mode();
  // Each OpenMP thread of this thread's team has its own control register.
  if (omp_get_max_threads() > 1) {
#pragma omp parallel
    set_mode();
  }
}

}  // namespace dpt
