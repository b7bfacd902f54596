// One ResNet-18 training step (forward, mean cross-entropy, backward) and one evaluation
// forward on the CPU backend: how many layout reorders each runs, and how long it takes, in
// two variants alternated step by step in one run, so that the machine's drift slows both
// alike:
//   --compare fusion (default): every layer as its own op ("unfused": ExecutionOptions::fusion
//     and ops::set_fused_kernels off) against the fusion pass with the fused kernels ("fused");
//   --compare layouts: add and accumulate reading their operands plain, as before 2026-12-04
//     ("plain"), against activations kept in the convolutions' layout ("kept");
//   --compare algorithm: the 3x3 stride-1 convolutions direct ("direct") against Winograd
//     ("winograd", ops/precision.h).
// Also times evaluation with BatchNorm folded into the convolutions (nn::fold_batch_norm)
// against the unfolded evaluation, alternating the same way.
//
//   build/bench/resnet18_step [--batch 32] [--steps 4] [--compare fusion|layouts|algorithm] [--fold-only]
#include <algorithm>
#include <optional>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpt/data/idx_dataset.h"
#include "dpt/autograd/engine.h"
#include "dpt/autograd/node.h"
#include "dpt/core/random.h"
#include "dpt/nn/fold.h"
#include "dpt/nn/fusion.h"
#include "dpt/nn/init.h"
#include "dpt/nn/models.h"
#include "dpt/ops/cpu/layout.h"
#include "dpt/ops/fused_kernels.h"
#include "dpt/ops/ops.h"
#include "dpt/ops/precision.h"
#include "dpt/ops/testing.h"

using dpt::Tensor;
namespace nn = dpt::nn;
namespace cpu = dpt::ops::cpu;

namespace {
double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 32;
  int steps = 4;
  bool fold_only = false;
  std::string compare = "fusion";
  for (int i = 1; i < argc; i += 2) {
    if (!std::strcmp(argv[i], "--fold-only")) fold_only = true, --i;
    else if (i + 1 >= argc) return 2;
    else if (!std::strcmp(argv[i], "--batch")) batch = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--compare")) compare = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--batch 32] [--steps 4] [--compare fusion|layouts|algorithm] [--fold-only]\n",
                   argv[0]);
      return 2;
    }
  }
  if (compare != "fusion" && compare != "layouts" && compare != "algorithm") {
    std::fprintf(stderr, "resnet18_step: --compare takes fusion, layouts or algorithm, got %s\n", compare.c_str());
    return 2;
  }
  // Variant 0 is the baseline, variant 1 the default behaviour.
  const bool fusion = compare == "fusion", algorithm = compare == "algorithm";
  const char* names[2] = {fusion ? "unfused" : algorithm ? "direct" : "plain",
                          fusion ? "fused" : algorithm ? "winograd" : "kept"};
  std::optional<dpt::ops::ExecutionScope> scope;  // this thread's execution options for the variant
  const auto select = [&](int variant) {
    scope.reset();
    if (fusion) {
      scope.emplace(dpt::ops::ExecutionOptions{.fusion = variant == 1});
      dpt::ops::set_fused_kernels(variant == 1);
    } else if (algorithm) {
      scope.emplace(dpt::ops::ExecutionOptions{
          .conv_algorithm = variant == 1 ? dpt::ops::ConvAlgorithm::winograd : dpt::ops::ConvAlgorithm::direct});
    } else {
      cpu::set_keep_activation_layouts(variant == 1);
    }
  };
  auto net = nn::resnet18(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  nn::init_weights(*net, nn::Init::kaiming, 0);
  dpt::Rng rng(1);
  Tensor X = Tensor::empty({batch, 1, 28, 28});
  dpt::fill_uniform(X, 0.0f, 1.0f, rng);
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t& l : labels) l = static_cast<int64_t>(rng() % 10);
  const Tensor y = Tensor::from_labels(labels);

  struct Count {
    int64_t forward = 0, backward = 0;
  };
  const auto train_step = [&](Count& count) {
    net->train();
    const int64_t r0 = cpu::reorder_count();
    const Tensor loss = dpt::ops::cross_entropy((*net)(X), y, dpt::ops::Reduction::mean);
    loss.item();
    const int64_t r1 = cpu::reorder_count();
    dpt::autograd::backward(loss);
    net->zero_grad();
    count = {r1 - r0, cpu::reorder_count() - r1};
  };
  const auto eval_forward = [&](nn::Module& model, int64_t& count) {
    dpt::autograd::NoGradGuard no_grad;
    const int64_t r0 = cpu::reorder_count();
    model(X).to_vector();
    count = cpu::reorder_count() - r0;
  };

  std::printf("ResNet-18 on 28 x 28 images, batch %lld, %d timed steps per variant (after one warm-up each)\n",
              static_cast<long long>(batch), steps);
  std::vector<double> step_ms[2], eval_ms[2];
  Count counts[2];
  int64_t eval_counts[2] = {0, 0};
  for (int s = fold_only ? steps : -1; s < steps; ++s) {
    for (int v = 0; v < 2; ++v) {
      const int variant = (s & 1) ? 1 - v : v;  // each goes first every other step
      select(variant);
      const double t0 = now_ms();
      train_step(counts[variant]);
      const double t1 = now_ms();
      net->eval();
      eval_forward(*net, eval_counts[variant]);
      const double t2 = now_ms();
      if (s >= 0) step_ms[variant].push_back(t1 - t0), eval_ms[variant].push_back(t2 - t1);
    }
  }
  select(1);
  for (int v = 0; v < 2 && !fold_only; ++v)
    std::printf("  %-6s reorders per training step: %lld (forward %lld, backward %lld); per evaluation forward: %lld;"
                " step %.1f ms, evaluation forward %.1f ms (medians)\n",
                names[v], static_cast<long long>(counts[v].forward + counts[v].backward),
                static_cast<long long>(counts[v].forward), static_cast<long long>(counts[v].backward),
                static_cast<long long>(eval_counts[v]), median(step_ms[v]), median(eval_ms[v]));
  if (!fold_only)
    std::printf("ratio (%s / %s): training step %.3fx, evaluation %.3fx\n", names[0], names[1],
                median(step_ms[0]) / median(step_ms[1]), median(eval_ms[0]) / median(eval_ms[1]));

  // Folded BatchNorm against unfolded, in eval mode, alternating.
  net->eval();
  const std::unique_ptr<nn::Module> folded = nn::fold_batch_norm(*net);
  std::vector<double> fold_ms[2];
  int64_t fold_counts[2] = {0, 0};
  for (int s = -1; s < steps; ++s) {
    for (int v = 0; v < 2; ++v) {
      const int variant = (s & 1) ? 1 - v : v;
      const double t0 = now_ms();
      eval_forward(variant == 0 ? *net : *folded, fold_counts[variant]);
      if (s >= 0) fold_ms[variant].push_back(now_ms() - t0);
    }
  }
  double fold_build = now_ms();
  nn::fold_batch_norm(*net);
  fold_build = now_ms() - fold_build;
  std::printf("  evaluation forward: unfolded %.1f ms (%lld reorders), BatchNorm folded %.1f ms (%lld reorders);"
              " folding itself %.1f ms\n",
              median(fold_ms[0]), static_cast<long long>(fold_counts[0]), median(fold_ms[1]),
              static_cast<long long>(fold_counts[1]), fold_build);
  std::printf("ratio (unfolded / folded): evaluation %.3fx\n", median(fold_ms[0]) / median(fold_ms[1]));
  return 0;
}
