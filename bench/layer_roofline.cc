// Roofline-style report: for each layer's forward, backward-data and backward-weights
// kernel, the time, the FLOPs and the GFLOP/s achieved, against the fp32 FMA peak this
// machine measures (one core, and all cores at once). Memory-bound layers (ReLU, pooling)
// report GB/s instead. It shows where an epoch's time goes and how far each kernel is from
// the floor.
//   bench/layer_roofline [--model lenet|resnet18] [--batch N] [--threads 1] [--algorithm winograd|direct]
// LeNet: every kernel of a step. ResNet-18: each distinct convolution shape once, weighted
// by how many of the 20 convolutions have it. The default batches are one device's shard
// of `--devices cpu:2` at the benchmarks' batches: 128 of LeNet's 256, 64 of ResNet-18's 128.
// GFLOP counts a direct convolution's multiply-adds: a pass that runs Winograd (marked
// "wino"; ops/precision.h) does fewer, so its share of the peak can pass 100%.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dpt/data/idx_dataset.h"
#include "dpt/core/denormals.h"
#include "dpt/core/random.h"
#include "dpt/nn/lenet.h"
#include "dpt/ops/cpu/kernels.h"
#include "dpt/ops/cpu/layout.h"
#include "dpt/ops/precision.h"

using namespace dpt;

namespace {

using Clock = std::chrono::steady_clock;

// Median seconds of `repeats` calls after a few warm-up calls.
double median_seconds(const std::function<void()>& f, int repeats = 15) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    f();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + repeats / 2, times.end());
  return times[repeats / 2];
}

// fp32 FMA throughput of one core over one short burst: 12 independent FMA chains keep
// both FMA pipes busy whatever their latency. One body, compiled for 512-bit and for
// 256-bit vectors.
#define DPT_FMA_GFLOPS(NAME, TARGET, LANES)                                             \
  __attribute__((target(TARGET), noinline)) double NAME() {                             \
    typedef float vec __attribute__((vector_size(LANES * 4)));                          \
    constexpr int kChains = 12;                                                         \
    constexpr long kIterations = 20'000;                                                \
    vec acc[kChains];                                                                   \
    for (int c = 0; c < kChains; ++c) acc[c] = vec{} + (1.0f + 0.001f * c);             \
    const vec a = vec{} + 0.999999f, b = vec{} + 0.000001f;                             \
    const auto start = Clock::now();                                                    \
    for (long i = 0; i < kIterations; ++i) {                                            \
      for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;                        \
    }                                                                                   \
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count(); \
    float sink = 0;                                                                     \
    for (int c = 0; c < kChains; ++c) sink += acc[c][0];                                \
    if (sink == 12345.0f) std::puts(""); /* keeps the loop alive */                     \
    return 2.0 * LANES * kChains * static_cast<double>(kIterations) / seconds / 1e9;    \
  }
DPT_FMA_GFLOPS(fma_gflops_avx512, "avx512f", 16)
DPT_FMA_GFLOPS(fma_gflops_avx2, "avx2,fma", 8)

// The best of many sub-millisecond bursts: a burst the scheduler preempted (another
// process on the core) only lowers its own figure, not the maximum.
double best_of_bursts(double (*burst)()) {
  double best = 0;
  for (int i = 0; i < 500; ++i) best = std::max(best, burst());
  return best;
}

double core_peak_gflops() {
  if (__builtin_cpu_supports("avx512f")) return best_of_bursts(fma_gflops_avx512);
  if (__builtin_cpu_supports("fma")) return best_of_bursts(fma_gflops_avx2);
  return 0;
}

struct Row {
  std::string layer, pass;
  double seconds, gflop, gbytes;  // gflop == 0: a memory-bound layer
  int count = 1;                  // how many layers of the model run this kernel per step
};

// One line per kernel (ms, GFLOP and rate of one call), then the step's total: each
// kernel's time times its count.
void print(const std::vector<Row>& rows, double peak, int width) {
  const bool counted = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.count != 1; });
  std::printf("%-*s %-15s %s%9s %9s %10s %8s\n", width, "layer", "pass", counted ? "  x" : "", "ms", "GFLOP", "GFLOP/s",
              "of peak");
  double total = 0;
  for (const Row& r : rows) {
    total += r.count * r.seconds;
    std::printf("%-*s %-15s ", width, r.layer.c_str(), r.pass.c_str());
    if (counted) std::printf("%3d", r.count);
    if (r.gflop > 0) {
      const double rate = r.gflop / r.seconds;
      std::printf("%9.2f %9.3f %10.1f %7.0f%%\n", r.seconds * 1e3, r.gflop, rate, 100 * rate / peak);
    } else {
      std::printf("%9.2f %9s %7.1f GB/s\n", r.seconds * 1e3, "-", r.gbytes / r.seconds);
    }
  }
  std::printf("%-*s %-15s %s%9.2f\n", width, "all", counted ? "(x counts)" : "", counted ? "   " : "", total * 1e3);
}

double total_gflop(const std::vector<Row>& rows) {
  double flops = 0;
  for (const Row& r : rows) flops += r.count * r.gflop;
  return flops;
}

double total_seconds(const std::vector<Row>& rows) {
  double seconds = 0;
  for (const Row& r : rows) seconds += r.count * r.seconds;
  return seconds;
}

// Every LeNet kernel of a training step, in the layouts and with the fusions training uses.
std::vector<Row> lenet_rows(int64_t batch) {
  const std::vector<Tensor> p = nn::lenet_params(0, dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  Tensor x = Tensor::empty({batch, 1, 28, 28});
  Rng rng(1);
  fill_uniform(x, 0.0f, 1.0f, rng);
  const ops::cpu::ConvGeometry g{};
  const double B = static_cast<double>(batch);
  std::vector<Row> rows;
  const auto add = [&](const std::string& layer, const std::string& pass, double gflop, double gbytes,
                       const std::function<void()>& f) {
    rows.push_back({layer, pass, median_seconds(f), gflop, gbytes});
  };

  // Forward activations, kept to feed the next layer and the backward passes. The
  // convolutions apply their ReLU as they write (nn::lenet's ops::conv2d_relu), so r1 and
  // r2 are both the convolutions' and the ReLUs' outputs.
  constexpr bool kFusedRelu = true;
  const Tensor r1 = ops::cpu::conv2d_forward(x, p[0], p[1], g, {batch, 20, 26, 26}, kFusedRelu);
  // conv1 -> ReLU -> pool1 in one kernel (a first layer: its input needs no gradient), as
  // conv2d_relu_avg_pool2d runs it on AVX-512 machines; elsewhere conv1 and pool1 apart.
  const Shape pooled1{batch, 20, 13, 13};
  const ops::cpu::PoolResult fused1 = ops::cpu::conv2d_relu_avg_pool_forward(x, p[0], p[1], g, 2, pooled1, true);
  const bool first_layer_kernel = fused1.out.defined();
  const auto p1 = first_layer_kernel ? fused1 : ops::cpu::pool2d_forward(r1, ops::cpu::PoolKind::avg, 2, 2, pooled1);
  // pool2 keeps 8 x 8 of conv2's 9 x 9 outputs, which read 12 x 12 of pool1's 13 x 13:
  // conv2d_relu_avg_pool2d convolves that corner only (a copy of it, `c1`).
  const Tensor c1 = ops::cpu::crop_corner(p1.out, 12, 12);
  const Tensor r2 = ops::cpu::conv2d_forward(c1, p[2], p[3], g, {batch, 50, 8, 8}, kFusedRelu);
  const auto p2 = ops::cpu::pool2d_forward(r2, ops::cpu::PoolKind::avg, 2, 2, {batch, 50, 4, 4});
  Tensor f2 = Tensor::empty({batch, 800});  // flatten: the plain form of pool2's output
  f2.copy_from(p2.out);
  const Tensor l3 = ops::cpu::linear_forward(f2, p[4], p[5]);
  const Tensor r3 = ops::cpu::activation_forward(l3, ops::Activation::relu);
  const Tensor l4 = ops::cpu::linear_forward(r3, p[6], p[7]);

  const double conv1 = 2 * B * 20 * 26 * 26 * 1 * 9 / 1e9, conv2 = 2 * B * 50 * 8 * 8 * 20 * 25 / 1e9;
  const double fc3 = 2 * B * 800 * 128 / 1e9, fc4 = 2 * B * 128 * 10 / 1e9;
  const auto bytes = [&](const Tensor& t) { return 2.0 * static_cast<double>(t.bytes()) / 1e9; };  // read + write

  if (first_layer_kernel) {
    add("conv1+pool1", "forward", conv1, 0,
        [&] { ops::cpu::conv2d_relu_avg_pool_forward(x, p[0], p[1], g, 2, pooled1, true); });
  } else {
    add("conv1+relu", "forward", conv1, 0, [&] {
      ops::cpu::conv2d_forward(x, p[0], p[1], g, {batch, 20, 26, 26}, kFusedRelu);
    });
    add("pool1", "forward", 0, bytes(r1),
        [&] { ops::cpu::pool2d_forward(r1, ops::cpu::PoolKind::avg, 2, 2, pooled1); });
  }
  add("crop1", "forward", 0, bytes(c1), [&] { ops::cpu::crop_corner(p1.out, 12, 12); });
  add("conv2+relu", "forward", conv2, 0, [&] {
    ops::cpu::conv2d_forward(c1, p[2], p[3], g, {batch, 50, 8, 8}, kFusedRelu);
  });
  add("pool2", "forward", 0, bytes(r2), [&] {
    ops::cpu::pool2d_forward(r2, ops::cpu::PoolKind::avg, 2, 2, {batch, 50, 4, 4});
  });
  add("fc3", "forward", fc3, 0, [&] { ops::cpu::linear_forward(f2, p[4], p[5]); });
  add("fc4", "forward", fc4, 0, [&] { ops::cpu::linear_forward(r3, p[6], p[7]); });

  const Tensor gl4 = Tensor::full({batch, 10}, 0.01f);
  const Tensor gw4 = Tensor::empty({10, 128}), gb4 = Tensor::empty({10});
  const Tensor gw3 = Tensor::empty({128, 800}), gb3 = Tensor::empty({128});
  const Tensor gw2 = Tensor::empty({50, 20, 5, 5}), gb2 = Tensor::empty({50});
  const Tensor gw1 = Tensor::empty({20, 1, 3, 3}), gb1 = Tensor::empty({20});
  const Tensor gr3 = ops::cpu::linear_backward_data(gl4, p[6], {batch, 128});
  const Tensor gl3 = ops::cpu::activation_backward(gr3, l3, ops::Activation::relu);
  const Tensor gc2_pooled = ops::cpu::linear_backward_data(gl3, p[4], {batch, 800});
  Tensor gp2 = Tensor::empty({batch, 50, 4, 4});
  gp2.copy_from(gc2_pooled);
  // The pooling's and the ReLU's backward in one pass, masked by the output, as
  // conv2d_relu_avg_pool2d does.
  const Tensor gc2 = ops::cpu::relu_avg_pool_backward(gp2, r2, 2);
  const Tensor gc1_cropped = ops::cpu::conv2d_backward_data(gc2, p[2], {batch, 20, 12, 12}, g);
  const Tensor gp1 = ops::cpu::pad_corner(gc1_cropped, {batch, 20, 13, 13});

  add("fc4", "backward-x", fc4, 0, [&] { ops::cpu::linear_backward_data(gl4, p[6], {batch, 128}); });
  add("fc4", "backward-w", fc4, 0, [&] { ops::cpu::linear_backward_weights(gl4, r3, gw4, gb4); });
  add("fc3", "backward-x", fc3, 0, [&] { ops::cpu::linear_backward_data(gl3, p[4], {batch, 800}); });
  add("fc3", "backward-w", fc3, 0, [&] { ops::cpu::linear_backward_weights(gl3, f2, gw3, gb3); });
  // Reads the ReLU's output and the pooled gradient, writes the convolution's gradient.
  add("pool2+relu2", "backward", 0, bytes(r2) + bytes(gp2) / 2, [&] { ops::cpu::relu_avg_pool_backward(gp2, r2, 2); });
  add("conv2", "backward-x", conv2, 0, [&] { ops::cpu::conv2d_backward_data(gc2, p[2], {batch, 20, 12, 12}, g); });
  add("crop1", "backward", 0, bytes(gp1), [&] { ops::cpu::pad_corner(gc1_cropped, {batch, 20, 13, 13}); });
  add("conv2", "backward-w", conv2, 0, [&] { ops::cpu::conv2d_backward_weights(gc2, c1, gw2, gb2, g); });
  // conv1's input needs no gradient: its weight and bias gradients come straight from
  // pool1's gradient in one kernel (pool1 + relu1 backward included), as training runs it
  // on AVX-512 machines; elsewhere pool1 + relu1 backward and oneDNN's backward-weights.
  if (first_layer_kernel) {
    add("conv1+pool1", "backward-w", conv1, 0,
        [&] { ops::cpu::conv2d_relu_avg_pool_weight_grads(gp1, fused1, 2, x, g, gw1, gb1); });
  } else {
    const Tensor gc1 = ops::cpu::relu_avg_pool_backward(gp1, r1, 2);
    add("pool1+relu1", "backward", 0, bytes(r1) + bytes(gp1) / 2,
        [&] { ops::cpu::relu_avg_pool_backward(gp1, r1, 2); });
    add("conv1", "backward-w", conv1, 0, [&] { ops::cpu::conv2d_backward_weights(gc1, x, gw1, gb1, g); });
  }

  return rows;
}

// ResNet-18's convolutions on 28 x 28 input (nn::resnet18): each distinct shape once, the
// 20 convolutions counted by shape.
struct ConvShape {
  const char* name;
  int64_t in_channels, out_channels;
  int kernel, stride;
  int64_t size;       // input height = width
  int count;          // convolutions of this shape in the network
  bool input_grad;    // false for the first layer: its input (the image) needs no gradient
};
constexpr ConvShape kResnet18Convs[] = {
    {"stem 1-64 3x3 @28", 1, 64, 3, 1, 28, 1, false},
    {"64-64 3x3 @28", 64, 64, 3, 1, 28, 4, true},
    {"64-128 3x3 s2 @28", 64, 128, 3, 2, 28, 1, true},
    {"64-128 1x1 s2 @28", 64, 128, 1, 2, 28, 1, true},
    {"128-128 3x3 @14", 128, 128, 3, 1, 14, 3, true},
    {"128-256 3x3 s2 @14", 128, 256, 3, 2, 14, 1, true},
    {"128-256 1x1 s2 @14", 128, 256, 1, 2, 14, 1, true},
    {"256-256 3x3 @7", 256, 256, 3, 1, 7, 3, true},
    {"256-512 3x3 s2 @7", 256, 512, 3, 2, 7, 1, true},
    {"256-512 1x1 s2 @7", 256, 512, 1, 2, 7, 1, true},
    {"512-512 3x3 @4", 512, 512, 3, 1, 4, 3, true},
};

// The layout a kernel leaves an activation of `channels` channels in, as the layer before
// would: the output of a `channels`-to-`channels` convolution (the image stays plain).
dnnl::memory::format_tag activation_layout(int64_t batch, int64_t channels, int64_t size) {
  if (channels == 1) return dnnl::memory::format_tag::nchw;
  const Tensor probe = Tensor::zeros({batch, channels, size, size});
  const Tensor w = Tensor::zeros({channels, channels, 1, 1}), b = Tensor::zeros({channels});
  return ops::cpu::activation_layout_of(ops::cpu::conv2d_forward(probe, w, b, {}, {batch, channels, size, size}));
}

const char* layout_name(dnnl::memory::format_tag tag) {
  using tag_t = dnnl::memory::format_tag;
  switch (tag) {
    case tag_t::nchw: return "nchw";
    case tag_t::nhwc: return "nhwc";
    case tag_t::nChw8c: return "nChw8c";
    case tag_t::nChw16c: return "nChw16c";
    default: return "other";
  }
}

// Each shape's forward (training applies BatchNorm after it, so no fused ReLU),
// backward-data and backward-weights, with input and output gradient in the layouts the
// neighbouring layers leave them in and the weights plain, as training runs them.
std::vector<Row> resnet18_rows(int64_t batch) {
  std::vector<Row> rows;
  Rng rng(1);
  const double B = static_cast<double>(batch);
  for (const ConvShape& c : kResnet18Convs) {
    const int padding = c.kernel / 2;
    const int64_t out_size = (c.size + 2 * padding - c.kernel) / c.stride + 1;
    const ops::cpu::ConvGeometry g{c.stride, padding};
    const Shape x_shape{batch, c.in_channels, c.size, c.size}, y_shape{batch, c.out_channels, out_size, out_size};
    Tensor x = Tensor::empty(x_shape), dy = Tensor::empty(y_shape);
    Tensor w = Tensor::empty({c.out_channels, c.in_channels, c.kernel, c.kernel}), b = Tensor::zeros({c.out_channels});
    fill_uniform(x, -1.0f, 1.0f, rng);
    fill_uniform(dy, -0.01f, 0.01f, rng);
    fill_uniform(w, -0.05f, 0.05f, rng);
    const Tensor x_in = ops::cpu::copy_in_layout(x, activation_layout(batch, c.in_channels, c.size));
    const Tensor y = ops::cpu::conv2d_forward(x_in, w, b, g, y_shape);
    const Tensor dy_in = ops::cpu::copy_in_layout(dy, ops::cpu::activation_layout_of(y));
    const Tensor gw = Tensor::empty(w.shape()), gb = Tensor::empty(b.shape());
    const double gflop = 2 * B * static_cast<double>(c.out_channels * out_size * out_size * c.in_channels) * c.kernel *
                         c.kernel / 1e9;
    const std::string layer = std::string(c.name) + " " + layout_name(ops::cpu::activation_layout_of(x_in)) + ">" +
                              layout_name(ops::cpu::activation_layout_of(y));
    const ops::cpu::ConvImplementations used = ops::cpu::conv2d_implementations(x_shape, w.shape(), y_shape, g);
    const auto pass = [](const char* name, const std::string& implementation) {
      return std::string(name) + (implementation.find("wino") != std::string::npos ? " wino" : "");
    };
    rows.push_back({layer, pass("forward", used.forward), median_seconds([&] { ops::cpu::conv2d_forward(x_in, w, b, g, y_shape); }, 7),
                    gflop, 0, c.count});
    if (c.input_grad) {
      rows.push_back({layer, pass("backward-x", used.backward_data),
                      median_seconds([&] { ops::cpu::conv2d_backward_data(dy_in, w, x_shape, g); }, 7), gflop, 0,
                      c.count});
    }
    rows.push_back({layer, pass("backward-w", used.backward_weights),
                    median_seconds([&] { ops::cpu::conv2d_backward_weights(dy_in, x_in, gw, gb, g); }, 7), gflop, 0,
                    c.count});
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "lenet";
  int64_t batch = 0;  // 0: the model's default
  int threads = 1;
  ops::ExecutionOptions execution;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc ||
        (flag != "--model" && flag != "--batch" && flag != "--threads" && flag != "--algorithm")) {
      std::fprintf(stderr,
                   "usage: layer_roofline [--model lenet|resnet18] [--batch N] [--threads T] "
                   "[--algorithm winograd|direct]\n");
      return 2;
    }
    if (flag == "--model") model = argv[i + 1];
    if (flag == "--batch") batch = std::stoll(argv[i + 1]);
    if (flag == "--threads") threads = std::stoi(argv[i + 1]);
    if (flag == "--algorithm") execution.conv_algorithm = ops::parse_conv_algorithm(argv[i + 1]);
  }
  if (model != "lenet" && model != "resnet18") {
    std::fprintf(stderr, "layer_roofline: unknown --model '%s': expected lenet or resnet18\n", model.c_str());
    return 2;
  }
  if (batch == 0) batch = model == "lenet" ? 128 : 64;
  const ops::ExecutionScope run_options(execution);  // the layers run on this thread
  flush_denormals_on_this_thread();
  omp_set_num_threads(threads);

  const double one_core = core_peak_gflops();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<double> per_thread(cores);
  std::vector<std::thread> workers;
  for (unsigned c = 0; c < cores; ++c) workers.emplace_back([&, c] { per_thread[c] = core_peak_gflops(); });
  for (auto& w : workers) w.join();
  double all_cores = 0;
  for (double g : per_thread) all_cores += g;
  const double peak = one_core * threads;
  std::printf("fp32 FMA peak measured: %.1f GFLOP/s on one core, %.1f GFLOP/s on all %u cores at once\n", one_core,
              all_cores, cores);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) {
    std::printf("(with 256-bit AVX2 FMAs only: %.1f GFLOP/s on one core)\n", best_of_bursts(fma_gflops_avx2));
  }
  std::printf("%s at batch %lld with %d thread%s (peak for the percentages: %.1f GFLOP/s)\n\n",
              model == "lenet" ? "LeNet kernels" : "ResNet-18 convolutions", static_cast<long long>(batch), threads,
              threads == 1 ? "" : "s", peak);

  const std::vector<Row> rows = model == "lenet" ? lenet_rows(batch) : resnet18_rows(batch);
  print(rows, peak, model == "lenet" ? 11 : 34);
  const double flops = total_gflop(rows), seconds = total_seconds(rows);
  std::printf("\nfloor for one training step of these kernels at peak: %.2f ms (%.3f GFLOP, direct)\n", flops / peak * 1e3,
              flops);
  if (model == "resnet18") {
    std::printf("at these speeds the convolutions alone allow %.1f images/s on %d thread%s (direct's floor: %.1f)\n",
                static_cast<double>(batch) / seconds, threads, threads == 1 ? "" : "s",
                static_cast<double>(batch) / (flops / peak));
  }
  return 0;
}
