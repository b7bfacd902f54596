#include "dpt/nn/init.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "dpt/core/config_error.h"
#include "dpt/core/random.h"

namespace dpt::nn {

Init parse_init(std::string_view name) {
  if (name == "lesson") return Init::lesson;
  if (name == "kaiming") return Init::kaiming;
  if (name == "xavier") return Init::xavier;
  throw bad_choice("init", name, kInits);
}

void init_weights(Module& module, Init scheme, uint64_t seed) {
  Rng rng(seed);
  for (const Tensor& w : module.parameters()) {
    if (w.ndim() < 2) continue;
    // fan_in / fan_out of a linear [out, in] or conv [out, in, kh, kw] weight.
    const double receptive = static_cast<double>(w.numel()) / static_cast<double>(w.dim(0) * w.dim(1));
    const double fan_in = static_cast<double>(w.dim(1)) * receptive;
    const double fan_out = static_cast<double>(w.dim(0)) * receptive;
    switch (scheme) {
      case Init::lesson:
        fill_normal(w, 0.0f, 0.01f, rng);
        break;
      case Init::kaiming:
        fill_normal(w, 0.0f, static_cast<float>(std::sqrt(2.0 / fan_in)), rng);
        break;
      case Init::xavier: {
        const float bound = static_cast<float>(std::sqrt(6.0 / (fan_in + fan_out)));
        fill_uniform(w, -bound, bound, rng);
        break;
      }
    }
  }
}

}  // namespace dpt::nn
