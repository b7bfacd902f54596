#include "dpt/core/cpu_features.h"

namespace dpt {

bool cpu_has_avx512f() {
  static const bool has = [] {
    __builtin_cpu_init();  // may run before the constructor that initializes the CPU model
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return has;
}

}  // namespace dpt
