// Denormal (subnormal) floats take a slow microcode path on x86: 10-100x per operation.
// The lesson's LeNet starts with N(0, 0.01^2) weights, so for its whole first epoch
// activations and gradients are tiny and many land in the denormal range; without
// flushing them, that epoch runs several times slower. Flushing them to zero is what
// torch.set_flush_denormal(True) does, and changes no result a model can notice.
#pragma once

namespace dpt {

// Sets flush-to-zero and denormals-are-zero for the calling thread and for the OpenMP
// threads it uses (the setting is per thread).
void flush_denormals_on_this_thread();

}  // namespace dpt
