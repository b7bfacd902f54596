#include "dpt/ops/backend.h"
#include "dpt/ops/testing.h"

#include <atomic>

#include "dpt/autograd/engine.h"
#include "dpt/ops/fused_kernels.h"

namespace dpt::ops {

namespace {
std::atomic<bool> fused_kernels_on{true};
}  // namespace

void set_fused_kernels(bool on) { fused_kernels_on.store(on); }
bool fused_kernels_enabled() { return fused_kernels_on.load(std::memory_order_relaxed); }

const Backend& backend_for(Device device) { return device.kind == Device::Kind::cuda ? cuda_backend() : cpu_backend(); }

namespace {
// Backward sums gradients with the backends' kernels, on whichever device they are: the
// autograd layer, below this one, is told how when the program starts.
const bool kGradientAdderInstalled = [] {
  autograd::set_gradient_adder([](const Tensor& into, const Tensor& from) { backend_for(into).accumulate(into, from); });
  return true;
}();
}  // namespace

}  // namespace dpt::ops
