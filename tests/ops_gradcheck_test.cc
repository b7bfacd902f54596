// Gradient checks: every op's backward() against central finite differences of its forward.
//
// Method. For an op f with inputs x_1..x_m, a fixed random tensor R of the output's shape
// turns the output into one scalar L = sum(f(x) * R), so that dL/dx_i is a full
// vector-Jacobian product that exercises every output element. The analytic gradient comes
// from backward(); the numeric one perturbs each input element by +-h and takes
// (L(x+h) - L(x-h)) / 2h, with L summed in double from the float32 outputs.
//
// Tolerance. An element passes when |analytic - numeric| <= kTolerance * max(kFloor, |numeric|),
// kTolerance = 2e-3, kFloor = 0.1: relative down to |g| = 0.1, and an absolute 2e-4 below
// it. (The floor was 1, which let a 2e-3 error through on every gradient under 1: a 6.7%
// scale error on gradients of ~0.006 passed; see GradCheckSelfTest below.) Why those numbers:
//  * Rounding: the forward runs in float32 (eps = 6e-8). Perturbing one input element changes
//    only the outputs in its receptive field (at most a few dozen here, values O(1-10)); all
//    other outputs are bit-identical in L(x+h) and L(x-h) and cancel exactly. So L's rounding
//    noise is about eps * |out| * sqrt(#affected) ~ 1e-6, and dividing by 2h = 2e-2 leaves
//    ~5e-5 in the numeric derivative.
//  * Truncation: conv, linear, matmul, add, reshape and the pools are linear in each single
//    input element (and relu / max pool are kept away from their kinks), so the O(h^2) term
//    is zero; for cross_entropy it is h^2/6 * |d3L| <= ~2e-5 with h = 1e-2.
//  Measured (DPT_GRADCHECK_VERBOSE=1 prints it per input): <= 5e-5 for every op and the
//  end-to-end chain, 2e-4 for cross_entropy on logits of +-30 (|L| ~ 30 scales the rounding
//  noise), so correct ops sit 10-40x inside the bound.
//  * The floor: below it the bound is absolute, kTolerance * kFloor = 2e-4, which must stay
//    above the absolute rounding noise of the numeric derivative (it does not shrink with
//    the gradient: it is L's rounding over 2h) or a correct tiny gradient would fail. The
//    worst absolute error measured over every check here is 1.2e-4 (the fused
//    conv2d_relu_avg_pool2d checks, whose outputs are the largest), 4.4e-4 for cross_entropy
//    on logits of +-30, where every such error sits on a gradient above 0.2 and is checked
//    relatively; so 0.1 leaves 1.6x over the worst noise. Above the floor the check is
//    relative: a 0.2% error on any gradient of 0.1 or more fails. Real bugs are O(1) on O(1) gradients:
//  a transposed weight gradient, a missing bias gradient (an undefined grad fails outright),
//  a padding off by one pixel, a pool routing its gradient to the wrong window element, a
//  wrong mean scale (1/N with N >= 2 is a >= 50% error). The self-tests below show that a
//  transposed gradient and even a uniform 1% scale error fail the check.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "dpt/autograd/engine.h"
#include "dpt/autograd/node.h"
#include "dpt/core/config_error.h"
#include "dpt/core/random.h"
#include "dpt/core/tensor.h"
#include "dpt/ops/cpu/layout.h"
#include "dpt/ops/ops.h"
#include "dpt/ops/precision.h"

using dpt::DType;
using dpt::Shape;
using dpt::Tensor;
namespace ops = dpt::ops;

namespace {

// The CPU backend's activation layouts, as dnnl format tags: its own rule (undef), then
// plain nchw, nhwc, nChw8c and nChw16c forced (ops::cpu::force_activation_layout).
const std::vector<int> kLayoutModes{
    static_cast<int>(dnnl::memory::format_tag::undef), static_cast<int>(dnnl::memory::format_tag::nchw),
    static_cast<int>(dnnl::memory::format_tag::nhwc), static_cast<int>(dnnl::memory::format_tag::nChw8c),
    static_cast<int>(dnnl::memory::format_tag::nChw16c)};
std::string layout_mode_name(int mode) {
  using tag = dnnl::memory::format_tag;
  switch (static_cast<tag>(mode)) {
    case tag::nchw: return "nchw";
    case tag::nhwc: return "nhwc";
    case tag::nChw8c: return "nChw8c";
    case tag::nChw16c: return "nChw16c";
    default: return "the rule";
  }
}
class ForcedLayout {
 public:
  explicit ForcedLayout(int mode) { dpt::ops::cpu::force_activation_layout(static_cast<dnnl::memory::format_tag>(mode)); }
  ~ForcedLayout() { dpt::ops::cpu::force_activation_layout(dnnl::memory::format_tag::undef); }
  ForcedLayout(const ForcedLayout&) = delete;
  ForcedLayout& operator=(const ForcedLayout&) = delete;
};

constexpr double kStep = 1e-2;
constexpr double kTolerance = 2e-3;
constexpr double kFloor = 0.1;

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

// sum(out * r) as a one-element tensor whose backward is r * grad: the scalar the gradient
// check differentiates. Written here (not with library ops) so that no op under test is
// also part of the loss.
Tensor weighted_sum(const Tensor& out, const Tensor& r) {
  const float* o = out.data<float>();
  const float* w = r.data<float>();
  double total = 0.0;
  for (int64_t i = 0; i < out.numel(); ++i) total += static_cast<double>(o[i]) * w[i];
  Tensor loss = Tensor::full({1}, static_cast<float>(total));
  if (dpt::autograd::should_record({&out})) {
    dpt::autograd::record(loss, "weighted_sum", {&out}, [r, shape = out.shape()](const Tensor& grad) {
      Tensor g = Tensor::empty(shape);
      const float scale = grad.data<float>()[0];
      for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] = scale * r.data<float>()[i];
      return std::vector<Tensor>{g};
    });
  }
  return loss;
}

// L = sum(f(inputs) * r) in double, from the float32 outputs, without recording a graph.
double scalar_loss(const OpFn& f, const std::vector<Tensor>& inputs, const Tensor& r) {
  dpt::autograd::NoGradGuard no_grad;
  const Tensor out = f(inputs);
  const float* o = out.data<float>();
  const float* w = r.data<float>();
  double total = 0.0;
  for (int64_t i = 0; i < out.numel(); ++i) total += static_cast<double>(o[i]) * static_cast<double>(w[i]);
  return total;
}

// Checks d(sum(f(inputs) * R))/d(input) from backward() against central differences for
// every element of every input with check[i] (all inputs when `check` is empty). Inputs not
// checked must come out of backward() with no gradient.
void expect_gradients_match(const OpFn& f, std::vector<Tensor> inputs, std::vector<bool> check = {},
                            double step = kStep, double floor = kFloor) {
  if (check.empty()) check.assign(inputs.size(), true);
  ASSERT_EQ(check.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i].zero_grad();
    inputs[i].set_requires_grad(check[i]);
  }

  const Tensor out = f(inputs);
  ASSERT_TRUE(out.needs_grad()) << "the op recorded no backward";
  dpt::Rng rng(1234);
  const Tensor r = Tensor::empty(out.shape());
  dpt::fill_normal(r, 0.0f, 1.0f, rng);
  dpt::autograd::backward(weighted_sum(out, r));

  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor& x = inputs[i];
    if (!check[i]) {
      EXPECT_FALSE(x.grad().defined()) << "input " << i << " does not require grad but got one";
      continue;
    }
    const Tensor grad = x.grad();
    ASSERT_TRUE(grad.defined()) << "input " << i << " " << dpt::shape_str(x.shape()) << " got no gradient";
    ASSERT_EQ(grad.shape(), x.shape()) << "input " << i;
    // Copy the analytic gradient now: later forwards must not be able to change it.
    const std::vector<float> analytic = grad.to_vector();

    float* v = x.data<float>();
    double worst = 0.0, worst_absolute = 0.0;
    int64_t failures = 0;
    std::ostringstream first_failures;
    for (int64_t j = 0; j < x.numel(); ++j) {
      const float saved = v[j];
      v[j] = static_cast<float>(saved + step);
      const double plus = scalar_loss(f, inputs, r);
      v[j] = static_cast<float>(saved - step);
      const double minus = scalar_loss(f, inputs, r);
      v[j] = saved;
      // Divide by the step the float input actually took, not the nominal one.
      const double taken =
          static_cast<double>(static_cast<float>(saved + step)) - static_cast<double>(static_cast<float>(saved - step));
      const double numeric = (plus - minus) / taken;
      const double error = std::abs(analytic[j] - numeric) / std::max(floor, std::abs(numeric));
      worst = std::max(worst, error);
      worst_absolute = std::max(worst_absolute, std::abs(analytic[j] - numeric));
      if (error > kTolerance && failures++ < 5) {
        first_failures << "\n  element " << j << ": analytic " << analytic[j] << ", numeric " << numeric;
      }
    }
    if (std::getenv("DPT_GRADCHECK_VERBOSE")) {
      std::cout << "  input " << i << " " << dpt::shape_str(x.shape()) << ": worst scaled error " << worst
                << ", worst absolute error " << worst_absolute << "\n";
    }
    EXPECT_EQ(failures, 0) << "input " << i << " " << dpt::shape_str(x.shape()) << ": " << failures << " of "
                           << x.numel() << " elements off (worst scaled error " << worst << ")" << first_failures.str();
  }
}

Tensor random_tensor(const Shape& shape, uint64_t seed, float scale = 1.0f) {
  dpt::Rng rng(seed);
  Tensor t = Tensor::empty(shape);
  dpt::fill_uniform(t, -scale, scale, rng);
  return t;
}

// Values whose magnitude is in [0.1, 1] with random signs: a +-h step (h = 0.01) never
// crosses relu's kink at 0.
Tensor away_from_zero(const Shape& shape, uint64_t seed) {
  dpt::Rng rng(seed);
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double magnitude = 0.1 + 0.9 * dpt::uniform01(rng);
    p[i] = static_cast<float>(dpt::uniform01(rng) < 0.5 ? -magnitude : magnitude);
  }
  return t;
}

// A shuffled 0.1 * {0, 1, ..., n-1}: any two values differ by >= 0.1 > 2h, so a finite
// step never changes which element of a pooling window is the maximum.
Tensor well_separated(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  std::vector<int64_t> order(static_cast<size_t>(t.numel()));
  std::iota(order.begin(), order.end(), 0);
  dpt::Rng rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.1f * static_cast<float>(order[i]) - 1.0f;
  return t;
}

// ---------------------------------------------------------------------------------------
// conv2d

OpFn conv(int stride, int padding, bool with_bias) {
  return [=](const std::vector<Tensor>& in) {
    return ops::conv2d(in[0], in[1], with_bias ? in[2] : Tensor(), stride, padding);
  };
}

TEST(GradCheck, Conv2dStride1Pad0WithBias) {
  expect_gradients_match(conv(1, 0, true),
                         {random_tensor({2, 2, 5, 5}, 1), random_tensor({3, 2, 3, 3}, 2), random_tensor({3}, 3)});
}

TEST(GradCheck, Conv2dStride1Pad0NoBias) {
  expect_gradients_match(conv(1, 0, false), {random_tensor({2, 2, 5, 5}, 4), random_tensor({3, 2, 3, 3}, 5)});
}

TEST(GradCheck, Conv2dStride2Pad1WithBias) {
  expect_gradients_match(conv(2, 1, true),
                         {random_tensor({2, 3, 5, 5}, 6), random_tensor({2, 3, 3, 3}, 7), random_tensor({2}, 8)});
}

TEST(GradCheck, Conv2dStride2Pad1NoBias) {
  expect_gradients_match(conv(2, 1, false), {random_tensor({1, 2, 6, 6}, 9), random_tensor({4, 2, 3, 3}, 10)});
}

TEST(GradCheck, Conv2dNonSquareInputAndKernel) {
  // 4x7 input, 2x3 kernel, padding 1: catches swapped height and width anywhere.
  expect_gradients_match(conv(1, 1, true),
                         {random_tensor({2, 2, 4, 7}, 11), random_tensor({3, 2, 2, 3}, 12), random_tensor({3}, 13)});
}

TEST(GradCheck, Conv2dNonSquareStride2) {
  // 7x6 with stride 2: the last row/column of the padded input is dropped by the floor.
  expect_gradients_match(conv(2, 1, true),
                         {random_tensor({2, 1, 7, 6}, 14), random_tensor({2, 1, 3, 3}, 15), random_tensor({2}, 16)});
}

// conv2d_relu must be relu(conv2d(...)) exactly: the same values and the same gradients
// for input, weight and bias, bit for bit, in every activation layout (each forced in turn,
// and under the backend's rule: on AVX-512 all four cases run channels-last there, as each
// has an output channel count that leaves a 16-channel block partly empty), with the
// upstream gradient reaching the kernel through a sum weighted by a random tensor.
TEST(Conv2dRelu, FusedEqualsReluOfConv2dBitForBit) {
  struct Case {
    Shape x, w;
    int stride, padding;
  };
  const std::vector<Case> cases{{{3, 1, 9, 9}, {4, 1, 3, 3}, 1, 0},
                                {{2, 3, 7, 6}, {5, 3, 3, 3}, 2, 1},
                                {{2, 16, 6, 6}, {8, 16, 3, 3}, 1, 1},
                                {{4, 20, 13, 13}, {50, 20, 5, 5}, 1, 0}};
  for (const int mode : kLayoutModes)
  for (uint64_t seed = 100; const Case& c : cases) {
    const ForcedLayout forced(mode);
    SCOPED_TRACE("x " + dpt::shape_str(c.x) + " w " + dpt::shape_str(c.w) + " layout " + layout_mode_name(mode));
    const Tensor x = random_tensor(c.x, seed++), w = random_tensor(c.w, seed++), b = random_tensor({c.w[0]}, seed++);
    std::vector<std::vector<float>> results[2];
    for (bool fused : {false, true}) {
      std::vector<Tensor> in{x.detach(), w.detach(), b.detach()};
      for (Tensor& t : in) t.set_requires_grad(true);
      const Tensor y = fused ? ops::conv2d_relu(in[0], in[1], in[2], c.stride, c.padding)
                             : ops::relu(ops::conv2d(in[0], in[1], in[2], c.stride, c.padding));
      const Tensor weights = random_tensor(y.shape(), seed);
      dpt::autograd::backward(weighted_sum(y, weights));
      results[fused] = {y.to_vector(), in[0].grad().to_vector(), in[1].grad().to_vector(), in[2].grad().to_vector()};
    }
    const char* names[] = {"output", "grad x", "grad weight", "grad bias"};
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(results[1][i], results[0][i]) << names[i];
    size_t zeros = 0;  // the ReLU must really cut something, or the test proves little
    for (float v : results[0][0]) zeros += v == 0.0f;
    EXPECT_GT(zeros, results[0][0].size() / 5);
    EXPECT_LT(zeros, results[0][0].size() * 4 / 5);
  }
}

// conv2d_relu_avg_pool2d must be avg_pool2d(conv2d_relu(...)) exactly, forward and for
// every input's gradient: LeNet's two blocks (the second pools 9 -> 4, dropping a row and a
// column, so the fused op convolves 12 x 12 of its 13 x 13 input), a strided and padded
// convolution, a 16 -> 16 channel one (blocked on AVX-512 under the backend's rule) pooled
// 3 x 3 (a divisor that is not a power of two), pool 1 (no pooling at all), and two more
// crops; in every activation layout but plain (see below), each forced in turn and under
// the rule.
TEST(Conv2dReluAvgPool, EqualsAvgPoolOfConv2dReluBitForBit) {
  struct Case {
    Shape x, w;
    int stride, padding, pool;
  };
  const std::vector<Case> cases{{{4, 1, 28, 28}, {20, 1, 3, 3}, 1, 0, 2},
                                {{4, 20, 13, 13}, {50, 20, 5, 5}, 1, 0, 2},
                                {{2, 3, 7, 6}, {5, 3, 3, 3}, 2, 1, 2},
                                {{2, 16, 10, 11}, {16, 16, 3, 3}, 1, 1, 3},
                                {{3, 2, 5, 5}, {4, 2, 2, 2}, 1, 0, 1},
                                // The pooling drops a row and a column (2 from 11 x 12 by stride 2, 1 from 8 x 9):
                                // the fused op convolves only the input corner the kept outputs read.
                                {{2, 3, 11, 12}, {4, 3, 3, 3}, 2, 0, 2},
                                {{2, 4, 8, 9}, {6, 4, 3, 3}, 1, 0, 2}};
  for (const int mode : kLayoutModes)
  for (uint64_t seed = 300; const Case& c : cases) {
    // Not in plain nchw, which the rule never picks for a convolution: there oneDNN 2.6 runs
    // im2col + gemm, whose summation order depends on the image size, so convolving the
    // cropped corner rounds differently (ops_layout_sweep_test checks plain against a reference).
    if (mode == static_cast<int>(dnnl::memory::format_tag::nchw)) continue;
    const ForcedLayout forced(mode);
    SCOPED_TRACE("x " + dpt::shape_str(c.x) + " w " + dpt::shape_str(c.w) + " pool " + std::to_string(c.pool) +
                 " layout " + layout_mode_name(mode));
    const Tensor x = random_tensor(c.x, seed++), w = random_tensor(c.w, seed++), b = random_tensor({c.w[0]}, seed++);
    std::vector<std::vector<float>> results[2];
    for (bool fused : {false, true}) {
      std::vector<Tensor> in{x.detach(), w.detach(), b.detach()};
      for (Tensor& t : in) t.set_requires_grad(true);
      const Tensor y =
          fused ? ops::conv2d_relu_avg_pool2d(in[0], in[1], in[2], c.pool, c.stride, c.padding)
                : ops::avg_pool2d(ops::conv2d_relu(in[0], in[1], in[2], c.stride, c.padding), c.pool, c.pool);
      dpt::autograd::backward(weighted_sum(y, random_tensor(y.shape(), seed)));
      results[fused] = {y.to_vector(), in[0].grad().to_vector(), in[1].grad().to_vector(), in[2].grad().to_vector()};
    }
    ++seed;
    const char* names[] = {"output", "grad x", "grad weight", "grad bias"};
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(results[1][i], results[0][i]) << names[i];
  }
}

// With a bias that keeps every pre-activation positive the ReLU passes everything, so a
// finite-difference check never steps across its kink and tests the pooling's spread.
TEST(GradCheck, Conv2dReluAvgPoolAwayFromTheKink) {
  const OpFn block = [](const std::vector<Tensor>& in) {
    return ops::conv2d_relu_avg_pool2d(in[0], in[1], in[2], 2, 1, 1);
  };
  expect_gradients_match(
      block, {random_tensor({2, 2, 5, 6}, 40, 0.1f), random_tensor({3, 2, 3, 3}, 41, 0.1f), Tensor::full({3}, 5.0f)});
}

// A first layer (the input needs no gradient) with one input channel: on AVX-512 the
// weight and bias gradients come from one kernel that never writes the convolution's own
// gradient (Backend::conv2d_relu_avg_pool_weight_grads). Pooling 4 x 5 by 2 drops a column.
TEST(GradCheck, Conv2dReluAvgPoolFirstLayerAwayFromTheKink) {
  const OpFn block = [](const std::vector<Tensor>& in) { return ops::conv2d_relu_avg_pool2d(in[0], in[1], in[2], 2); };
  expect_gradients_match(
      block, {random_tensor({2, 1, 6, 7}, 42), random_tensor({5, 1, 3, 3}, 43, 0.1f), Tensor::full({5}, 5.0f)},
      {false, true, true});
}

// The same first-layer gradients at LeNet's conv1 shape, with the ReLU cutting (which a
// finite-difference check cannot step across), against the composed backward: pooling and
// ReLU backward, then the convolution's. Only the order of the sums differs, so they agree
// to float rounding of sums over 8 x 26 x 26 pixels.
TEST(Conv2dReluAvgPool, FirstLayerGradientsMatchTheComposedBackward) {
  const Tensor x = random_tensor({8, 1, 28, 28}, 50), w = random_tensor({20, 1, 3, 3}, 51);
  const Tensor b = random_tensor({20}, 52), r = random_tensor({8, 20, 13, 13}, 53);
  std::vector<float> grads[2][2];
  for (bool fused : {false, true}) {
    const Tensor wv = w.detach().set_requires_grad(true), bv = b.detach().set_requires_grad(true);
    const Tensor y =
        fused ? ops::conv2d_relu_avg_pool2d(x, wv, bv, 2) : ops::avg_pool2d(ops::conv2d_relu(x, wv, bv), 2, 2);
    dpt::autograd::backward(weighted_sum(y, r));
    grads[fused][0] = wv.grad().to_vector();
    grads[fused][1] = bv.grad().to_vector();
  }
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE(k == 0 ? "grad weight" : "grad bias");
    for (size_t i = 0; i < grads[0][k].size(); ++i)
      EXPECT_NEAR(grads[1][k][i], grads[0][k][i], 1e-4f * std::max(1.0f, std::abs(grads[0][k][i]))) << "element " << i;
  }
}

// A first layer's block runs as one kernel on AVX-512 (the convolution's output never
// written): its values must still be avg_pool2d(conv2d_relu(...)) bit for bit, with weights
// that need gradients (the kernel keeps ReLU masks) and without (evaluation). LeNet's
// conv1; 5 x 5 into 32 channels; 7 channels pooled 3 x 3 from 11 x 11 outputs (the
// pooling drops 2 rows and columns, and its divisor is not a power of two).
TEST(Conv2dReluAvgPool, FirstLayerForwardEqualsThePooledConvolutionBitForBit) {
  struct Case {
    Shape x, w;
    int pool;
  };
  const std::vector<Case> cases{
      {{5, 1, 28, 28}, {20, 1, 3, 3}, 2}, {{3, 1, 12, 14}, {32, 1, 5, 5}, 2}, {{2, 1, 13, 13}, {7, 1, 3, 3}, 3}};
  uint64_t seed = 70;
  for (const Case& c : cases) {
    SCOPED_TRACE("x " + dpt::shape_str(c.x) + " w " + dpt::shape_str(c.w) + " pool " + std::to_string(c.pool));
    const Tensor x = random_tensor(c.x, seed++), w = random_tensor(c.w, seed++), b = random_tensor({c.w[0]}, seed++);
    for (bool weights_need_grad : {true, false}) {
      const Tensor wv = w.detach().set_requires_grad(weights_need_grad);
      const std::vector<float> composed = ops::avg_pool2d(ops::conv2d_relu(x, wv, b), c.pool, c.pool).to_vector();
      const std::vector<float> fused = ops::conv2d_relu_avg_pool2d(x, wv, b, c.pool).to_vector();
      EXPECT_EQ(fused, composed) << (weights_need_grad ? "training" : "evaluation");
      size_t zeros = 0;  // the ReLU must cut some windows entirely, and not all
      for (float v : composed) zeros += v == 0.0f;
      EXPECT_GT(zeros, 0u);
      EXPECT_LT(zeros, composed.size());
    }
  }
}

// The CPU kernels split the images over a device's OpenMP threads; the first-layer weight
// gradients add per-image partial sums in image order, so cpu:1 with 1 or 2 threads (and
// a resumed run) gets the same bits.
TEST(Conv2dReluAvgPool, FirstLayerGradientsDoNotDependOnTheThreadCount) {
  const Tensor x = random_tensor({6, 1, 28, 28}, 60), w = random_tensor({20, 1, 3, 3}, 61);
  const Tensor b = random_tensor({20}, 62), r = random_tensor({6, 20, 13, 13}, 63);
  std::vector<float> results[2];
  const int threads_before = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    const Tensor wv = w.detach().set_requires_grad(true), bv = b.detach().set_requires_grad(true);
    dpt::autograd::backward(weighted_sum(ops::conv2d_relu_avg_pool2d(x, wv, bv, 2), r));
    results[threads - 1] = wv.grad().to_vector();
    const std::vector<float> bias = bv.grad().to_vector();
    results[threads - 1].insert(results[threads - 1].end(), bias.begin(), bias.end());
  }
  omp_set_num_threads(threads_before);
  EXPECT_EQ(results[1], results[0]);
}

TEST(Conv2dReluAvgPool, RefusesAWindowLargerThanTheConvolutionsOutput) {
  try {
    ops::conv2d_relu_avg_pool2d(random_tensor({1, 1, 4, 4}, 1), random_tensor({2, 1, 3, 3}, 2), Tensor(), 3);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "conv2d_relu_avg_pool2d: window 3 is larger than the convolution's output [1, 2, 2, 2]");
  }
}

// --precision bf16 rounds each multiplied operand to bfloat16 (8 significant bits: relative
// error at most 2^-8 each, so at most about 2^-7 per product) and accumulates in fp32. So
// every output of the forward, and every element of both gradients, may differ from fp32
// by at most 2^-7 times the same sum taken over the products' absolute values, which is
// the same convolution (and its gradients) on |x|, |w| and |r|; fp32's own rounding adds
// well under 1e-5 of that. The bf16 result must also differ from the fp32 one somewhere,
// or the setting did not reach the kernels.
TEST(Conv2dBf16, StaysWithinTheRoundingOfItsOperandsInEveryPass) {
  if (!dpt::ops::cpu_has_bf16()) {
    GTEST_SKIP() << "this CPU has no avx512_bf16, so --precision bf16 is refused here and there is nothing to test";
  }
  struct PrecisionScope {  // this thread's precision for the scope
    explicit PrecisionScope(dpt::ops::ConvPrecision p) : scope(dpt::ops::ExecutionOptions{.precision = p}) {}
    dpt::ops::ExecutionScope scope;
  };
  const auto abs_of = [](const Tensor& t) {
    Tensor out = Tensor::empty(t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) out.data<float>()[i] = std::fabs(t.data<float>()[i]);
    return out;
  };
  const Tensor x = random_tensor({4, 20, 13, 13}, 31), w = random_tensor({50, 20, 5, 5}, 32);
  const Tensor b = random_tensor({50}, 33), r = random_tensor({4, 50, 9, 9}, 34);
  // Output, grad x, grad w of sum(r * conv2d(x, w, b)) at the current precision.
  const auto passes = [&](const Tensor& xs, const Tensor& ws, const Tensor& rs) {
    std::vector<Tensor> in{xs.detach(), ws.detach(), b.detach()};
    for (Tensor& t : in) t.set_requires_grad(true);
    const Tensor y = ops::conv2d(in[0], in[1], in[2]);
    dpt::autograd::backward(weighted_sum(y, rs));
    return std::vector<std::vector<float>>{y.to_vector(), in[0].grad().to_vector(), in[1].grad().to_vector()};
  };
  const auto fp32 = passes(x, w, r);
  // The gradients' bounds are those of sum(|r| * conv2d(|x|, |w|)); the output's is
  // conv2d(|x|, |w|) without the bias, which is added in fp32.
  std::vector<std::vector<float>> magnitude = passes(abs_of(x), abs_of(w), abs_of(r));
  magnitude[0] = ops::conv2d(abs_of(x), abs_of(w), Tensor()).detach().to_vector();
  std::vector<std::vector<float>> bf16;
  {
    PrecisionScope scope(dpt::ops::ConvPrecision::bf16);
    bf16 = passes(x, w, r);
  }
  const char* names[] = {"output", "grad x", "grad weight"};
  for (size_t pass = 0; pass < 3; ++pass) {
    SCOPED_TRACE(names[pass]);
    ASSERT_EQ(bf16[pass].size(), fp32[pass].size());
    size_t differ = 0, over = 0;
    double worst = 0;
    for (size_t i = 0; i < fp32[pass].size(); ++i) {
      const double diff = std::fabs(static_cast<double>(bf16[pass][i]) - fp32[pass][i]);
      const double bound = std::ldexp(static_cast<double>(magnitude[pass][i]), -7) + 1e-6;
      differ += diff > 0;
      over += diff > bound;
      worst = std::max(worst, diff / bound);
    }
    EXPECT_EQ(over, 0u) << "worst difference / bound " << worst;
    EXPECT_GT(differ, fp32[pass].size() / 2) << "bf16 gave the fp32 result: the precision never reached the kernel";
  }
}

TEST(Conv2dBf16, PrecisionNamesAreChecked) {
  EXPECT_EQ(dpt::ops::parse_conv_precision("bf16"), dpt::ops::ConvPrecision::bf16);
  EXPECT_EQ(dpt::ops::precision_name(dpt::ops::parse_conv_precision("fp32")), "fp32");
  try {
    dpt::ops::parse_conv_precision("fp16");
    ADD_FAILURE() << "fp16 was accepted";
  } catch (const dpt::ConfigError& e) {
    EXPECT_EQ(e.field(), "precision");
    EXPECT_STREQ(e.what(), "`precision` must be fp32 or bf16, got 'fp16'");
  }
}

TEST(GradCheck, Conv2dOneByOneKernel) {
  expect_gradients_match(conv(1, 0, true),
                         {random_tensor({3, 4, 3, 3}, 17), random_tensor({5, 4, 1, 1}, 18), random_tensor({5}, 19)});
}

TEST(GradCheck, Conv2dStrideLargerThanKernelAndWidePadding) {
  // Stride 3 with a 2x2 kernel skips input pixels (their gradient is 0); padding 2 >= the
  // kernel makes whole output rows and columns see only padding (bias only).
  expect_gradients_match(conv(3, 2, true),
                         {random_tensor({2, 2, 7, 5}, 23), random_tensor({2, 2, 2, 2}, 24), random_tensor({2}, 25)});
}

TEST(GradCheck, Conv2dOnlySomeInputsRequireGrad) {
  // Each backward branch on its own: only x, only weight, only bias.
  const auto inputs = [] {
    return std::vector<Tensor>{random_tensor({2, 2, 4, 4}, 20), random_tensor({3, 2, 3, 3}, 21),
                               random_tensor({3}, 22)};
  };
  expect_gradients_match(conv(1, 1, true), inputs(), {true, false, false});
  expect_gradients_match(conv(1, 1, true), inputs(), {false, true, false});
  expect_gradients_match(conv(1, 1, true), inputs(), {false, false, true});
}

// ---------------------------------------------------------------------------------------
// pools

TEST(GradCheck, AvgPoolKernel2Stride2) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::avg_pool2d(in[0], 2, 2); },
                         {random_tensor({2, 3, 4, 6}, 30)});
}

TEST(GradCheck, AvgPoolKernel3Stride1Overlapping) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::avg_pool2d(in[0], 3, 1); },
                         {random_tensor({2, 2, 5, 4}, 31)});
}

TEST(GradCheck, AvgPoolOddInputFloor) {
  // 5x5 with kernel 2 stride 2: the last row and column fall outside every window (grad 0).
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::avg_pool2d(in[0], 2, 2); },
                         {random_tensor({1, 2, 5, 5}, 32)});
}

TEST(GradCheck, MaxPoolKernel2Stride2) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::max_pool2d(in[0], 2, 2); },
                         {well_separated({2, 3, 4, 6}, 33)});
}

TEST(GradCheck, MaxPoolKernel3Stride1Overlapping) {
  // An element that is the maximum of several windows must collect all their gradients.
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::max_pool2d(in[0], 3, 1); },
                         {well_separated({2, 2, 5, 4}, 34)});
}

TEST(GradCheck, MaxPoolOddInputFloor) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::max_pool2d(in[0], 2, 2); },
                         {well_separated({1, 2, 5, 5}, 35)});
}

// ---------------------------------------------------------------------------------------
// relu, linear, matmul, add

TEST(GradCheck, Relu) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::relu(in[0]); },
                         {away_from_zero({3, 2, 4, 5}, 40)});
}

// The other activations against finite differences (they are smooth: any input will do),
// on a 4-D tensor, a blocked conv output and a 2-D one, and their values against <cmath>.
class ActivationGradCheck : public testing::TestWithParam<ops::Activation> {};

TEST_P(ActivationGradCheck, MatchesFiniteDifferences) {
  const ops::Activation a = GetParam();
  expect_gradients_match([a](const std::vector<Tensor>& in) { return ops::activation(in[0], a); },
                         {random_tensor({2, 2, 3, 4}, 44, 3.0f)});
  expect_gradients_match([a](const std::vector<Tensor>& in) { return ops::activation(in[0], a); },
                         {random_tensor({6, 7}, 45, 3.0f)});
  expect_gradients_match(
      [a](const std::vector<Tensor>& in) { return ops::activation(ops::conv2d(in[0], in[1], in[2], 1, 1), a); },
      {random_tensor({1, 2, 4, 4}, 46), random_tensor({16, 2, 3, 3}, 47), random_tensor({16}, 48)});
}

TEST_P(ActivationGradCheck, ValuesMatchTheDefinition) {
  const ops::Activation a = GetParam();
  const Tensor x = random_tensor({5, 9}, 49, 4.0f);
  const std::vector<float> y = ops::activation(x, a).to_vector(), in = x.to_vector();
  for (size_t i = 0; i < in.size(); ++i) {
    const double v = in[i];
    const double want = a == ops::Activation::sigmoid ? 1.0 / (1.0 + std::exp(-v))
                        : a == ops::Activation::tanh  ? std::tanh(v)
                        : a == ops::Activation::gelu  ? 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)))
                                                      : std::max(v, 0.0);
    EXPECT_NEAR(y[i], want, 2e-6) << ops::activation_name(a) << "(" << v << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Smooth, ActivationGradCheck,
                         testing::Values(ops::Activation::sigmoid, ops::Activation::tanh, ops::Activation::gelu),
                         [](const testing::TestParamInfo<ops::Activation>& info) {
                           return std::string(ops::activation_name(info.param));
                         });

TEST(GradCheck, LinearWithBias) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1], in[2]); },
                         {random_tensor({4, 6}, 41), random_tensor({5, 6}, 42), random_tensor({5}, 43)});
}

TEST(GradCheck, LinearNoBias) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1], Tensor()); },
                         {random_tensor({3, 7}, 44), random_tensor({4, 7}, 45)});
}

TEST(GradCheck, LinearBatchOfOne) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1], in[2]); },
                         {random_tensor({1, 5}, 49), random_tensor({3, 5}, 39), random_tensor({3}, 38)});
}

TEST(GradCheck, LinearOnlyBiasRequiresGrad) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::linear(in[0], in[1], in[2]); },
                         {random_tensor({4, 6}, 46), random_tensor({5, 6}, 47), random_tensor({5}, 48)},
                         {false, false, true});
}

TEST(GradCheck, Matmul) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); },
                         {random_tensor({3, 5}, 50), random_tensor({5, 4}, 51)});
}

TEST(GradCheck, MatmulSquareOperands) {
  // Square operands: a gradient that forgot to transpose has the right shape but wrong values.
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::matmul(in[0], in[1]); },
                         {random_tensor({4, 4}, 52), random_tensor({4, 4}, 53)});
}

TEST(GradCheck, Add) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::add(in[0], in[1]); },
                         {random_tensor({2, 3, 4}, 60), random_tensor({2, 3, 4}, 61)});
}

TEST(GradCheck, AddSameTensorTwice) {
  // add(x, x) = 2x: the two paths into x must sum, so d/dx = 2 R.
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::add(in[0], in[0]); },
                         {random_tensor({3, 4}, 62)});
}

TEST(GradCheck, AddOfTwoOpsOnTheSameInput) {
  // Both operands computed from x: linear(x, W1) + linear(x, W2).
  expect_gradients_match(
      [](const std::vector<Tensor>& in) {
        return ops::add(ops::linear(in[0], in[1], Tensor()), ops::linear(in[0], in[2], Tensor()));
      },
      {random_tensor({3, 4}, 63), random_tensor({5, 4}, 64), random_tensor({5, 4}, 65)});
}

// ---------------------------------------------------------------------------------------
// reshape, flatten (views; checked chained into ops that compute)

TEST(GradCheck, FlattenIntoLinear) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::linear(ops::flatten(in[0]), in[1], in[2]); },
                         {random_tensor({2, 2, 3, 2}, 70), random_tensor({3, 12}, 71), random_tensor({3}, 72)});
}

TEST(GradCheck, ReshapeWithInferredDimIntoMatmul) {
  expect_gradients_match(
      [](const std::vector<Tensor>& in) {
        return ops::matmul(ops::reshape(in[0], {-1, 6}), in[1]);
      },
      {random_tensor({2, 3, 4}, 73), random_tensor({6, 2}, 74)});
}

TEST(GradCheck, ReshapeOfAnOpOutputThenBack) {
  // conv output -> [N, -1] -> back to 4-D -> avg pool: gradients pass through two views.
  expect_gradients_match(
      [](const std::vector<Tensor>& in) {
        const Tensor y = ops::conv2d(in[0], in[1], Tensor(), 1, 0);
        const Tensor flat = ops::reshape(y, {y.dim(0), -1});
        return ops::avg_pool2d(ops::reshape(flat, y.shape()), 2, 2);
      },
      {random_tensor({2, 1, 5, 5}, 75), random_tensor({2, 1, 2, 2}, 76)});
}

// ---------------------------------------------------------------------------------------
// cross_entropy

OpFn cross_entropy_with(std::vector<int64_t> labels, ops::Reduction reduction, float label_smoothing = 0.0f) {
  return [labels = Tensor::from_labels(labels), reduction, label_smoothing](const std::vector<Tensor>& in) {
    return ops::cross_entropy(in[0], labels, reduction, label_smoothing);
  };
}

TEST(GradCheck, CrossEntropyNone) {
  // The per-example losses [N] enter L as a weighted sum with random weights R, so each
  // example's gradient is checked with its own scale.
  expect_gradients_match(cross_entropy_with({0, 3, 1, 3, 2}, ops::Reduction::none), {random_tensor({5, 4}, 80, 2.0f)});
}

TEST(GradCheck, CrossEntropySum) {
  expect_gradients_match(cross_entropy_with({2, 0, 1, 1}, ops::Reduction::sum), {random_tensor({4, 3}, 81, 2.0f)});
}

TEST(GradCheck, CrossEntropyMean) {
  expect_gradients_match(cross_entropy_with({4, 0, 2}, ops::Reduction::mean), {random_tensor({3, 5}, 82, 2.0f)});
}

TEST(GradCheck, CrossEntropyLargeLogits) {
  // Logits around +-30: exp() would overflow float without the max shift.
  expect_gradients_match(cross_entropy_with({1, 0, 2}, ops::Reduction::sum), {random_tensor({3, 3}, 83, 30.0f)});
}

TEST(GradCheck, CrossEntropyWithLabelSmoothing) {
  expect_gradients_match(cross_entropy_with({0, 3, 1, 3, 2}, ops::Reduction::none, 0.1f),
                         {random_tensor({5, 4}, 84, 2.0f)});
  expect_gradients_match(cross_entropy_with({2, 0, 1, 1}, ops::Reduction::sum, 0.3f), {random_tensor({4, 3}, 85, 2.0f)});
  expect_gradients_match(cross_entropy_with({4, 0, 2}, ops::Reduction::mean, 0.5f), {random_tensor({3, 5}, 86, 2.0f)});
}

// ---------------------------------------------------------------------------------------
// mse_loss (the targets need no gradient)

OpFn mse_with(ops::Reduction reduction) {
  return [reduction](const std::vector<Tensor>& in) { return ops::mse_loss(in[0], in[1], reduction); };
}

TEST(GradCheck, MseLossEveryReduction) {
  for (const ops::Reduction reduction : {ops::Reduction::none, ops::Reduction::sum, ops::Reduction::mean}) {
    expect_gradients_match(mse_with(reduction), {random_tensor({4, 5}, 87, 2.0f), random_tensor({4, 5}, 88, 1.0f)},
                           {true, false});
  }
}

// ---------------------------------------------------------------------------------------
// The check itself must catch typical backward bugs; these ops have them on purpose.

// C = A B with a chosen (possibly wrong) backward for B.
Tensor matmul_with_grad_b(const Tensor& a, const Tensor& b,
                          std::function<Tensor(const Tensor&, const Tensor&)> grad_b) {
  Tensor out;
  {
    dpt::autograd::NoGradGuard no_grad;
    out = ops::matmul(a, b);
  }
  dpt::autograd::record(out, "buggy_matmul", {&a, &b}, [a = a.detach(), grad_b](const Tensor& grad_out) {
    dpt::autograd::NoGradGuard no_grad;
    return std::vector<Tensor>{Tensor(), grad_b(a, grad_out)};
  });
  return out;
}

// The correct dB = A^T dC, computed naively.
Tensor naive_a_transpose_times(const Tensor& a, const Tensor& g) {
  const int64_t m = a.dim(0), k = a.dim(1), n = g.dim(1);
  Tensor out = Tensor::zeros({k, n});
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i)
        out.data<float>()[p * n + j] += a.data<float>()[i * k + p] * g.data<float>()[i * n + j];
  return out;
}

TEST(GradCheckSelfTest, AcceptsTheCorrectBackward) {
  expect_gradients_match(
      [](const std::vector<Tensor>& in) { return matmul_with_grad_b(in[0], in[1], naive_a_transpose_times); },
      {random_tensor({4, 4}, 100), random_tensor({4, 4}, 101)}, {false, true});
}

TEST(GradCheckSelfTest, CatchesATransposedWeightGradient) {
  EXPECT_NONFATAL_FAILURE(expect_gradients_match(
                              [](const std::vector<Tensor>& in) {
                                return matmul_with_grad_b(in[0], in[1], [](const Tensor& a, const Tensor& g) {
                                  const Tensor right = naive_a_transpose_times(a, g);
                                  Tensor wrong = Tensor::empty(right.shape());
                                  const int64_t n = right.dim(0);
                                  for (int64_t i = 0; i < n; ++i)
                                    for (int64_t j = 0; j < n; ++j)
                                      wrong.data<float>()[i * n + j] = right.data<float>()[j * n + i];
                                  return wrong;
                                });
                              },
                              {random_tensor({4, 4}, 100), random_tensor({4, 4}, 101)}, {false, true}),
                          "elements off");
}

TEST(GradCheckSelfTest, CatchesAOnePercentScaleError) {
  EXPECT_NONFATAL_FAILURE(expect_gradients_match(
                              [](const std::vector<Tensor>& in) {
                                return matmul_with_grad_b(in[0], in[1], [](const Tensor& a, const Tensor& g) {
                                  Tensor grad = naive_a_transpose_times(a, g);
                                  for (int64_t i = 0; i < grad.numel(); ++i) grad.data<float>()[i] *= 1.01f;
                                  return grad;
                                });
                              },
                              {random_tensor({4, 4}, 100), random_tensor({4, 4}, 101)}, {false, true}),
                          "elements off");
}

// 0.1 * global_avg_pool2d(x) with a chosen scale in its backward (the right one is
// 0.1 / (H W)): gradients of 0.1 / 16 ~ 0.006 per unit of R, small as most of a network's are.
Tensor small_mean_with_backward_scale(const Tensor& x, float backward_scale) {
  Tensor out;
  {
    dpt::autograd::NoGradGuard no_grad;
    out = ops::global_avg_pool2d(x);
    for (int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] *= 0.1f;
  }
  dpt::autograd::record(out, "small_mean", {&x}, [shape = x.shape(), backward_scale](const Tensor& grad_out) {
    Tensor g = Tensor::empty(shape);
    const int64_t plane = shape[2] * shape[3];
    for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] = grad_out.data<float>()[i / plane] * backward_scale;
    return std::vector<Tensor>{g};
  });
  return out;
}

TEST(GradCheckSelfTest, AcceptsTheRightSmallGradient) {
  expect_gradients_match(
      [](const std::vector<Tensor>& in) { return small_mean_with_backward_scale(in[0], 0.1f / 16); },
      {random_tensor({2, 3, 4, 4}, 102)});
}

// A pool scale of 1/15 instead of 1/16 (6.7% off) on gradients of ~0.006 |R|: each element
// is off by ~4e-4 |R|, which the former absolute bound for |g| < 1 (2e-3) let through; over
// the floor of 0.1 it is ~2x the tolerance at |R| = 1.
TEST(GradCheckSelfTest, CatchesAWrongScaleOnSmallGradients) {
  EXPECT_NONFATAL_FAILURE(
      expect_gradients_match(
          [](const std::vector<Tensor>& in) { return small_mean_with_backward_scale(in[0], 0.1f / 15); },
          {random_tensor({2, 3, 4, 4}, 102)}),
      "elements off");
}

// ---------------------------------------------------------------------------------------
// A small LeNet-shaped chain, end to end: every gradient through every op at once.

TEST(GradCheck, SmallConvNetEndToEnd) {
  const Tensor labels = Tensor::from_labels({1, 0});
  expect_gradients_match(
      [labels](const std::vector<Tensor>& in) {
        Tensor h = ops::conv2d(in[0], in[1], in[2], 1, 1);  // [2, 2, 6, 6]
        h = ops::avg_pool2d(ops::relu(h), 2, 2);            // [2, 2, 3, 3]
        h = ops::max_pool2d(h, 2, 1);                       // [2, 2, 2, 2]
        h = ops::linear(ops::flatten(h), in[3], in[4]);     // [2, 3]
        return ops::cross_entropy(h, labels, ops::Reduction::sum);
      },
      {random_tensor({2, 1, 6, 6}, 90), random_tensor({2, 1, 3, 3}, 91), random_tensor({2}, 92),
       random_tensor({3, 8}, 93), random_tensor({3}, 94)},
      {});
}

// ---------------------------------------------------------------------------------------
// batch_norm2d, global_avg_pool2d
//
// Training-mode batch norm is not linear in x (the batch mean and variance depend on every
// element of the channel), so its central difference has an O(h^2) truncation term; with
// per-channel variances ~1/3 and >= 18 values per channel it stays ~1e-4, well inside the
// bound (DPT_GRADCHECK_VERBOSE=1 shows it). In eval mode, and w.r.t. gamma and beta in
// either mode, the op is affine in each input and the term is zero.

// Running stats mutate in place on every training call: each call gets fresh copies so
// that every forward the check runs is the same pure function of its inputs.
OpFn batch_norm_with(bool training, const Tensor& running_mean, const Tensor& running_var) {
  return [=](const std::vector<Tensor>& in) {
    Tensor rm = running_mean.clone(), rv = running_var.clone();
    return ops::batch_norm2d(in[0], in[1], in[2], rm, rv, training);
  };
}

Tensor positive_tensor(const Shape& shape, uint64_t seed) {
  dpt::Rng rng(seed);
  Tensor t = Tensor::empty(shape);
  dpt::fill_uniform(t, 0.5f, 1.5f, rng);
  return t;
}

TEST(GradCheck, BatchNormTraining) {
  expect_gradients_match(batch_norm_with(true, random_tensor({3}, 110), positive_tensor({3}, 111)),
                         {random_tensor({2, 3, 3, 4}, 112), random_tensor({3}, 113, 2.0f), random_tensor({3}, 114)});
}

TEST(GradCheck, BatchNormTrainingOnlySomeInputsRequireGrad) {
  const auto inputs = [] {
    return std::vector<Tensor>{random_tensor({3, 2, 3, 2}, 115), random_tensor({2}, 116, 2.0f),
                               random_tensor({2}, 117)};
  };
  const OpFn f = batch_norm_with(true, Tensor::zeros({2}), Tensor::full({2}, 1.0f));
  expect_gradients_match(f, inputs(), {true, false, false});
  expect_gradients_match(f, inputs(), {false, true, false});
  expect_gradients_match(f, inputs(), {false, false, true});
}

TEST(GradCheck, BatchNormEval) {
  expect_gradients_match(batch_norm_with(false, random_tensor({3}, 120), positive_tensor({3}, 121)),
                         {random_tensor({2, 3, 3, 4}, 122), random_tensor({3}, 123, 2.0f), random_tensor({3}, 124)});
}

TEST(GradCheck, ConvBatchNormChainInTheConvolutionsLayout) {
  // The conv's output arrives in the convolution's layout (2 -> 3 channels: channels-last on
  // AVX-512, nChw8c with 3 of 8 channels used on AVX2) and batch norm runs in it, forward and
  // backward. ops_layout_sweep_test forces every layout at ResNet-18's shapes.
  const Tensor running_mean = Tensor::zeros({3}), running_var = Tensor::full({3}, 1.0f);
  for (const bool training : {true, false}) {
    expect_gradients_match(
        [=](const std::vector<Tensor>& in) {
          Tensor rm = running_mean.clone(), rv = running_var.clone();
          const Tensor h = ops::conv2d(in[0], in[1], Tensor(), 1, 1);  // [2, 3, 4, 5]
          return ops::avg_pool2d(ops::batch_norm2d(h, in[2], in[3], rm, rv, training), 2, 2);
        },
        {random_tensor({2, 2, 4, 5}, 125), random_tensor({3, 2, 3, 3}, 126), random_tensor({3}, 127, 2.0f),
         random_tensor({3}, 128)});
  }
}

TEST(GradCheck, GlobalAvgPoolSquare) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::global_avg_pool2d(in[0]); },
                         {random_tensor({2, 3, 4, 4}, 130)});
}

TEST(GradCheck, AdaptiveAvgPoolWithOverlappingBins) {
  // 7 rows into 3 bins ([0, 3), [2, 5), [4, 7)) share rows; 5 columns into 2 share one.
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::adaptive_avg_pool2d(in[0], 3, 2); },
                         {random_tensor({2, 3, 7, 5}, 132)});
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::adaptive_avg_pool2d(in[0], 4, 6); },
                         {random_tensor({1, 2, 4, 3}, 133)});  // more bins than columns: repeats
}

TEST(GradCheck, GlobalAvgPoolNonSquare) {
  expect_gradients_match([](const std::vector<Tensor>& in) { return ops::global_avg_pool2d(in[0]); },
                         {random_tensor({2, 3, 3, 5}, 131)});
}

TEST(GradCheck, GlobalAvgPoolAfterConvIntoLinear) {
  // ResNet's head: conv (output in the convolution's layout) -> global pool -> flatten -> linear.
  expect_gradients_match(
      [](const std::vector<Tensor>& in) {
        return ops::linear(ops::flatten(ops::global_avg_pool2d(ops::conv2d(in[0], in[1], Tensor(), 1, 0))), in[2],
                           Tensor());
      },
      {random_tensor({2, 2, 5, 4}, 132), random_tensor({3, 2, 2, 2}, 133), random_tensor({4, 3}, 134)});
}

}  // namespace
