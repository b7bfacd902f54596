#include "dpt/nn/fold.h"

namespace dpt::nn {

std::unique_ptr<Module> fold_batch_norm(const Module& module) {
  std::unique_ptr<Module> folded = module.clone();
  folded->eval();
  folded->fold_batch_norms();
  return folded;
}

}  // namespace dpt::nn
