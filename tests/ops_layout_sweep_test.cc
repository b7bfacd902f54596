// Every CPU kernel ResNet-18 runs, in every activation layout the CPU backend can run it in,
// against a naive double-precision loop, at ResNet-18's own layer shapes (batch 2).
//
// Layouts: the backend's rule (layout.cc: conv_activation_tag) picks, per convolution,
// channels-last (nhwc) or oneDNN's blocked choice (nChw16c on AVX-512, nChw8c on AVX2), so
// the layout a test runs in depends on the machine and on the channel counts (on AVX-512 a
// 2 -> 3 channel test runs channels-last, not blocked). Here each case runs five times:
// under the rule ("auto") and with the layout forced (ops::cpu::force_activation_layout) to
// plain nchw, nhwc, nChw8c and nChw16c, on any machine (but see ConvSweep for nChw16c
// without AVX-512); every output's layout is asserted before its values are read (reading a
// tensor converts it to plain).
//
// Tolerance. The inputs are exact floats and the references use them in double, so what
// differs is the float32 arithmetic of the kernels. A float sum of K terms t_i carries an
// error below gamma_K * sum|t_i| in any order (K u, u = 2^-24: rigorous but loose); the
// probabilistic bound of Higham and Mary (SIAM J. Sci. Comput. 2019) is
// lambda * sqrt(K) * u * sum|t_i|, exceeded with probability below 2K exp(-lambda^2 / 2) per
// element: lambda = 8 makes that < 1e-10 for K <= 4608. Each reference element comes with
// its sum of absolute terms ("magnitude"), and the check is
//     |actual - reference| <= 8 sqrt(K) u * magnitude + 1e-30.
// That still sees one misplaced term: for 512 -> 512 3x3 (K = 4608) a term of average size
// is magnitude / K, 6.7 times the tolerance; a wrong layout moves every value by O(value).
// BatchNorm: every statistic of M = N*H*W values (mean, variance, the backward's two sums)
// carries a relative error below e = 8 sqrt(M) u (1 + mean(x^2) / var), the last factor
// covering a variance computed as E[x^2] - mean^2; each output is bounded by e times the
// magnitudes of the quantities it combines (see bn_check). Max pooling, ReLU and the residual
// add must be exact (one rounding at most, which the reference rounds alike).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <dnnl.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dpt/core/cpu_features.h"
#include "dpt/core/tensor.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/fused_kernels.h"
#include "dpt/ops/precision.h"
#include "dpt/ops/cpu/kernels.h"
#include "dpt/ops/cpu/dnnl_context.h"
#include "dpt/ops/cpu/layout.h"
#include "test_support.h"

using dpt::Shape;
using dpt::Tensor;
namespace ops = dpt::ops;
namespace cpu = dpt::ops::cpu;
using tag = dnnl::memory::format_tag;

namespace {
using dpt::testing_support::random_tensor;

constexpr double kU = 1.0 / (1 << 24);  // float32's unit roundoff
constexpr double kLambda = 8.0;

const ops::Backend& backend() { return ops::cpu_backend(); }
// The CPU backend's fused kernels (ops/fused_kernels.h), checked against the composition of
// the reference kernels, which this sweep checks against double loops.
const ops::FusedKernels& fused() {
  const ops::FusedKernels* kernels = backend().fused();
  if (kernels == nullptr) throw std::logic_error("the CPU backend offers no fused kernels");
  return *kernels;
}

// The modes a case runs in: the backend's own rule (undef), then each layout forced.
const std::vector<tag> kModes{tag::undef, tag::nchw, tag::nhwc, tag::nChw8c, tag::nChw16c};

std::string layout_name(tag t) {
  switch (t) {
    case tag::undef: return "auto";
    case tag::nchw: return "nchw";
    case tag::nhwc: return "nhwc";
    case tag::nChw8c: return "nChw8c";
    case tag::nChw16c: return "nChw16c";
    default: return "other";
  }
}

// Forces the layout for one scope (undef: the rule).
class ForcedLayout {
 public:
  explicit ForcedLayout(tag t) { cpu::force_activation_layout(t); }
  ~ForcedLayout() { cpu::force_activation_layout(tag::undef); }
  ForcedLayout(const ForcedLayout&) = delete;
  ForcedLayout& operator=(const ForcedLayout&) = delete;
};

// The layouts the rule may leave a ResNet-18 activation in: never plain (oneDNN 2.6 runs
// reference kernels there), and on AVX-512 exactly what conv_activation_tag documents.
void expect_rule_layout(tag actual, int64_t in_channels, int64_t out_channels) {
  EXPECT_TRUE(actual == tag::nhwc || actual == tag::nChw8c || actual == tag::nChw16c)
      << "the rule left " << layout_name(actual);
  if (dpt::cpu_has_avx512f()) {
    const bool partly_empty = (in_channels > 1 && in_channels % 16 != 0) || out_channels % 16 != 0;
    EXPECT_EQ(layout_name(actual), layout_name(partly_empty ? tag::nhwc : tag::nChw16c));
  }
}

// Whether t's data is in layout `want` (layouts that put every element at the same byte,
// such as nchw, nhwc and nChw16c of a 1 x 1 plane of 512 channels, count as equal: the
// backend passes such a tensor between them without a reorder).
bool in_layout(const Tensor& t, tag want) {
  const dnnl::memory::desc plain(cpu::to_dims(t.shape()), dnnl::memory::data_type::f32, tag::nchw);
  return cpu::same_bytes(cpu::current_layout(t, plain), dnnl::memory::desc(plain.dims(), dnnl::memory::data_type::f32, want));
}
#define EXPECT_LAYOUT(t, want) \
  EXPECT_TRUE(in_layout(t, want)) << "in " << layout_name(cpu::activation_layout_of(t)) << ", not " << layout_name(want)
#define ASSERT_LAYOUT(t, want) \
  ASSERT_TRUE(in_layout(t, want)) << "in " << layout_name(cpu::activation_layout_of(t)) << ", not " << layout_name(want)

std::vector<double> as_doubles(const Tensor& plain) {
  const float* p = plain.data<float>();
  return std::vector<double>(p, p + plain.numel());
}

// The largest error / tolerance ratio seen in the running test, printed at its end: how
// far inside the tolerance the kernels are.
struct Worst {
  double ratio = 0.0;
  std::string what;
};
Worst g_worst;
class SweepTest {
 public:
  SweepTest() { g_worst = {}; }
  ~SweepTest() { std::printf("worst error / tolerance: %.3g (%s)\n", g_worst.ratio, g_worst.what.c_str()); }
};

// A reference: values and, per value, the sum of the absolute terms it was made of.
struct Reference {
  std::vector<double> value, magnitude;
  explicit Reference(size_t n = 0) : value(n, 0.0), magnitude(n, 0.0) {}
};

// |actual - value| <= tolerance, for every element; reports the first few failures and
// records the worst error / tolerance ratio.
void expect_within(const Tensor& actual, const std::vector<double>& value, const std::vector<double>& tolerance,
                   const std::string& what) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(value.size())) << what;
  const std::vector<float> a = actual.to_vector();
  int failures = 0;
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double tol = tolerance[i] + 1e-30;
    const double err = std::abs(static_cast<double>(a[i]) - value[i]);
    worst = std::max(worst, err / tol);
    if (err > tol && ++failures <= 5)
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", reference " << value[i] << " (error " << err
                    << " > tolerance " << tol << ")";
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << a.size() << " elements out of tolerance";
  ::testing::Test::RecordProperty(what + " worst error / tolerance", std::to_string(worst));
  if (worst > g_worst.ratio) g_worst = {worst, what};
}

// A sum of `terms` terms: lambda sqrt(terms) u * magnitude, plus `extra_ulps` roundings of
// the value itself.
void expect_near_reference(const Tensor& actual, const Reference& ref, double terms, const std::string& what,
                           double extra_ulps = 0.0) {
  std::vector<double> tolerance(ref.value.size());
  const double scale = kLambda * std::sqrt(terms) * kU;
  for (size_t i = 0; i < tolerance.size(); ++i)
    tolerance[i] = scale * ref.magnitude[i] + extra_ulps * kU * std::abs(ref.value[i]);
  expect_within(actual, ref.value, tolerance, what);
}

void expect_bitwise(const Tensor& actual, const std::vector<float>& expected, const std::string& what) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size())) << what;
  const std::vector<float> a = actual.to_vector();
  int failures = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != expected[i] && ++failures <= 5)
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", expected " << expected[i];
  }
  EXPECT_EQ(failures, 0) << what;
}

// ---------------------------------------------------------------------------------------
// Convolutions: forward (with and without the fused ReLU), backward-data, backward-weights
// and the bias gradient.

struct ConvCase {
  const char* name;
  Shape x, w;
  int stride, pad;
};

// ResNet-18's convolutions on 28 x 28 Fashion-MNIST (nn/models.cc), batch 2: all 11 shapes.
const std::vector<ConvCase> kConvs{
    {"stem_1to64_3x3_s1_28", {2, 1, 28, 28}, {64, 1, 3, 3}, 1, 1},
    {"stage1_64to64_3x3_s1_28", {2, 64, 28, 28}, {64, 64, 3, 3}, 1, 1},
    {"stage2_64to128_3x3_s2_28to14", {2, 64, 28, 28}, {128, 64, 3, 3}, 2, 1},
    {"stage2_shortcut_64to128_1x1_s2", {2, 64, 28, 28}, {128, 64, 1, 1}, 2, 0},
    {"stage2_128to128_3x3_s1_14", {2, 128, 14, 14}, {128, 128, 3, 3}, 1, 1},
    {"stage3_128to256_3x3_s2_14to7", {2, 128, 14, 14}, {256, 128, 3, 3}, 2, 1},
    {"stage3_shortcut_128to256_1x1_s2", {2, 128, 14, 14}, {256, 128, 1, 1}, 2, 0},
    {"stage3_256to256_3x3_s1_7", {2, 256, 7, 7}, {256, 256, 3, 3}, 1, 1},
    {"stage4_256to512_3x3_s2_7to4", {2, 256, 7, 7}, {512, 256, 3, 3}, 2, 1},
    {"stage4_shortcut_256to512_1x1_s2", {2, 256, 7, 7}, {512, 256, 1, 1}, 2, 0},
    {"stage4_512to512_3x3_s1_4", {2, 512, 4, 4}, {512, 512, 3, 3}, 1, 1},
};

// Which algorithm a convolution runs in a mode: Winograd (ops/precision.h) where the
// settings ask for it on a 3x3 stride-1 convolution of 16-channel blocks with AVX-512, else
// direct. Asserted from oneDNN's own names for the primitives it built.
bool expects_winograd(const ConvCase& c, tag layout, ops::ConvAlgorithm algorithm) {
  return algorithm == ops::ConvAlgorithm::winograd && dpt::cpu_has_avx512f() && layout == tag::nChw16c &&
         c.w[2] == 3 && c.stride == 1 && c.x[1] % 16 == 0;
}
void expect_algorithm(const ConvCase& c, const Shape& out, tag layout, ops::ConvAlgorithm algorithm) {
  const cpu::ConvImplementations used = cpu::conv2d_implementations(c.x, c.w, out, {c.stride, c.pad});
  const bool winograd = expects_winograd(c, layout, algorithm);
  for (const std::string& name : {used.forward, used.backward_data, used.backward_weights}) {
    EXPECT_EQ(name.find("wino") != std::string::npos, winograd)
        << "ran " << name << ", expected " << (winograd ? "Winograd" : "direct");
  }
}

// The convolutions' algorithm on this thread for one scope (ops::ExecutionScope).
class ConvAlgorithmScope {
 public:
  explicit ConvAlgorithmScope(ops::ConvAlgorithm a) : scope_(ops::ExecutionOptions{.conv_algorithm = a}) {}

 private:
  ops::ExecutionScope scope_;
};

struct ConvReferences {
  Reference y, dx, dw, db;
};

ConvReferences naive_conv(const ConvCase& c, const Shape& out, const std::vector<double>& x,
                          const std::vector<double>& w, const std::vector<double>& b, const std::vector<double>& dy) {
  const int64_t N = c.x[0], C = c.x[1], H = c.x[2], W = c.x[3];
  const int64_t O = c.w[0], KH = c.w[2], KW = c.w[3], OH = out[2], OW = out[3];
  ConvReferences r{Reference(static_cast<size_t>(N * O * OH * OW)), Reference(x.size()), Reference(w.size()),
                   Reference(static_cast<size_t>(O))};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const size_t yi = static_cast<size_t>(((n * O + o) * OH + oh) * OW + ow);
          r.y.value[yi] += b[o];
          r.y.magnitude[yi] += std::abs(b[o]);
          r.db.value[o] += dy[yi];
          r.db.magnitude[o] += std::abs(dy[yi]);
          for (int64_t ch = 0; ch < C; ++ch)
            for (int64_t kh = 0; kh < KH; ++kh) {
              const int64_t ih = oh * c.stride - c.pad + kh;
              if (ih < 0 || ih >= H) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t iw = ow * c.stride - c.pad + kw;
                if (iw < 0 || iw >= W) continue;
                const size_t xi = static_cast<size_t>(((n * C + ch) * H + ih) * W + iw);
                const size_t wi = static_cast<size_t>(((o * C + ch) * KH + kh) * KW + kw);
                r.y.value[yi] += x[xi] * w[wi];
                r.y.magnitude[yi] += std::abs(x[xi] * w[wi]);
                r.dx.value[xi] += dy[yi] * w[wi];
                r.dx.magnitude[xi] += std::abs(dy[yi] * w[wi]);
                r.dw.value[wi] += dy[yi] * x[xi];
                r.dw.magnitude[wi] += std::abs(dy[yi] * x[xi]);
              }
            }
        }
  return r;
}

class ConvSweep : public ::testing::TestWithParam<ConvCase>, public SweepTest {};

TEST_P(ConvSweep, ForwardBackwardDataAndWeightsInEveryLayout) {
  const ConvCase& c = GetParam();
  const Shape out{c.x[0], c.w[0], (c.x[2] + 2 * c.pad - c.w[2]) / c.stride + 1,
                  (c.x[3] + 2 * c.pad - c.w[3]) / c.stride + 1};
  // Kaiming-like scales (weights U(-a, a), a = sqrt(3 / fan_in)), so values stay O(1).
  const float a = static_cast<float>(std::sqrt(3.0 / static_cast<double>(c.w[1] * c.w[2] * c.w[3])));
  const Tensor x = random_tensor(c.x, 11), w = random_tensor(c.w, 12, -a, a), b = random_tensor({c.w[0]}, 13);
  const Tensor dy = random_tensor(out, 14);
  const ConvReferences ref = naive_conv(c, out, as_doubles(x), as_doubles(w), as_doubles(b), as_doubles(dy));
  Reference relu_ref = ref.y;
  for (size_t i = 0; i < relu_ref.value.size(); ++i) relu_ref.value[i] = std::max(0.0, relu_ref.value[i]);
  const double forward_terms = static_cast<double>(c.w[1] * c.w[2] * c.w[3] + 1);
  const double data_terms = static_cast<double>(c.w[0] * c.w[2] * c.w[3]);
  const double weight_terms = static_cast<double>(out[0] * out[2] * out[3]);
  const ops::ConvGeometry g{c.stride, c.pad};

  // Every layout with the default algorithm (Winograd where it fits), then, where it fits,
  // direct in the 16-channel block too: both can run these shapes in training.
  std::vector<std::pair<tag, ops::ConvAlgorithm>> runs;
  for (const tag mode : kModes) runs.emplace_back(mode, ops::ConvAlgorithm::winograd);
  if (expects_winograd(c, tag::nChw16c, ops::ConvAlgorithm::winograd))
    runs.emplace_back(tag::nChw16c, ops::ConvAlgorithm::direct);
  for (const auto& [mode, algorithm] : runs) {
    const ConvAlgorithmScope algorithm_scope(algorithm);
    const std::string where = std::string(c.name) + " " + layout_name(mode) +
                              (algorithm == ops::ConvAlgorithm::direct ? " direct" : "");
    // Without AVX-512 oneDNN 2.6 has no jit kernel for nChw16c (the rule never picks it
    // there) and runs its reference convolution, 10-25 s per 3x3 shape here: on such
    // machines the 16-channel block is checked on the stem, the 1x1 shortcut and stage 3's
    // strided 3x3 only (its layout handling is shape-independent); on AVX-512, on all.
    const bool reference_kernel = mode == tag::nChw16c && !dpt::cpu_has_avx512f();
    if (reference_kernel && c.w[1] != 1 && c.w[2] != 1 && c.x[1] != 128) {
      std::printf("%s: skipped (no AVX-512: oneDNN's reference kernel)\n", where.c_str());
      continue;
    }
    SCOPED_TRACE(where);
    const ForcedLayout forced(mode);
    const tag chosen = cpu::conv_activation_tag(c.x[1], c.w[0]);
    if (mode != tag::undef) {
      ASSERT_EQ(layout_name(chosen), layout_name(mode)) << "the override did not apply";
    }

    const auto start = std::chrono::steady_clock::now();
    // The input as the previous layer leaves it: in the convolutions' layout. Under the
    // rule oneDNN picks that one, so a first forward reads the plain input and tells us.
    tag layout = mode;
    if (mode == tag::undef) {
      const Tensor y_first = backend().conv2d_forward(x, w, b, g, out, false);
      layout = cpu::activation_layout_of(y_first);
      expect_rule_layout(layout, c.x[1], c.w[0]);
      expect_near_reference(y_first, ref.y, forward_terms, where + " forward (plain input)");
    }
    const Tensor x_in = cpu::copy_in_layout(x, layout), dy_in = cpu::copy_in_layout(dy, layout);
    ASSERT_LAYOUT(x_in, layout);
    expect_algorithm(c, out, layout, algorithm);

    const Tensor y = backend().conv2d_forward(x_in, w, b, g, out, false);
    const Tensor y_relu = backend().conv2d_forward(x_in, w, b, g, out, true);
    const Tensor dx = backend().conv2d_backward_data(dy_in, w, c.x, g);
    EXPECT_LAYOUT(y, layout) << "forward";
    EXPECT_LAYOUT(y_relu, layout) << "forward + relu";
    EXPECT_LAYOUT(dx, layout) << "backward-data";
    const Tensor dw = Tensor::empty(c.w), db = Tensor::empty({c.w[0]});
    backend().conv2d_backward_weights(dy_in, x_in, dw, db, g);

    expect_near_reference(y, ref.y, forward_terms, where + " forward");
    expect_near_reference(y_relu, relu_ref, forward_terms, where + " forward + relu");
    expect_near_reference(dx, ref.dx, data_terms, where + " backward-data");
    expect_near_reference(dw, ref.dw, weight_terms, where + " backward-weights");
    expect_near_reference(db, ref.db, weight_terms, where + " bias gradient");
    std::printf("%s: %.2f s\n", where.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}

INSTANTIATE_TEST_SUITE_P(ResNet18, ConvSweep, ::testing::ValuesIn(kConvs),
                         [](const ::testing::TestParamInfo<ConvCase>& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------
// The layers between the convolutions, at ResNet-18's activation shapes.

const std::vector<Shape> kActivations{{2, 64, 28, 28}, {2, 128, 14, 14}, {2, 256, 7, 7}, {2, 512, 4, 4}};

std::string shape_name(const Shape& s) { return dpt::shape_str(s); }

// The layouts an activation of these channels is in between ResNet-18's layers in `mode`.
tag layout_for(tag mode, int64_t channels) {
  const ForcedLayout forced(mode);
  const Tensor probe = backend().conv2d_forward(Tensor::zeros({1, channels, 4, 4}), Tensor::zeros({channels, channels, 1, 1}),
                                                Tensor(), {1, 0}, {1, channels, 4, 4}, false);
  return cpu::activation_layout_of(probe);
}

// BatchNorm: y = gamma (x - mean) / sqrt(var + eps) + beta, with the batch's statistics
// (training) or given ones (eval), and its backward, per channel in double, each value with
// its tolerance. x_hat = (x - mean) / sqrt(var + eps) carries an error below e (1 + |x_hat|):
//  * training: the mean and variance are sums of M = N*H*W values, so e = lambda sqrt(M) u
//    (1 + mean(x^2) / var), the last factor for a variance computed as E[x^2] - mean^2;
//  * eval: the statistics are given; x - mean (or x * s + (beta - mean * s)) rounds a few
//    times on values up to |x| + |mean|, so e = 4 u (1 + 2 |mean| / sqrt(var + eps)).
// Then y is off by at most |gamma| e (1 + |x_hat|) + 2 u (|y| + |beta|); grad beta = sum dy
// by lambda sqrt(M) u sum|dy|; grad gamma = sum dy x_hat by lambda sqrt(M) u sum|dy x_hat|
// + e sum|dy| (1 + |x_hat|); grad x in training, gamma / std (dy - mean(dy) - x_hat
// mean(dy x_hat)), by |gamma| / std e (|dy| + mean|dy| + (1 + |x_hat|) (mean|dy x_hat| +
// mean|dy| (1 + |x_hat|))) + 4 u |grad x|, and in eval (gamma / std dy) by 4 u |grad x|.
struct BnReference {
  std::vector<double> value, tolerance;
  explicit BnReference(size_t n) : value(n, 0.0), tolerance(n, 0.0) {}
};
struct BnReferences {
  BnReference y, dx, dgamma, dbeta;
};
BnReferences naive_batch_norm(const Shape& s, const std::vector<double>& x, const std::vector<double>& dy,
                              const std::vector<double>& gamma, const std::vector<double>& beta,
                              const std::vector<double>& given_mean, const std::vector<double>& given_var,
                              bool training, double eps) {
  const int64_t N = s[0], C = s[1], P = s[2] * s[3];
  const double M = static_cast<double>(N * P);
  const double sum_error = kLambda * std::sqrt(M) * kU;
  BnReferences r{BnReference(x.size()), BnReference(x.size()), BnReference(static_cast<size_t>(C)),
                 BnReference(static_cast<size_t>(C))};
  for (int64_t c = 0; c < C; ++c) {
    const auto at = [&](int64_t n, int64_t p) { return static_cast<size_t>((n * C + c) * P + p); };
    double sum = 0, sum_sq = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t p = 0; p < P; ++p) sum += x[at(n, p)], sum_sq += x[at(n, p)] * x[at(n, p)];
    double mean = given_mean[c], var = given_var[c];
    if (training) {
      mean = sum / M;
      var = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t p = 0; p < P; ++p) var += (x[at(n, p)] - mean) * (x[at(n, p)] - mean);
      var /= M;
    }
    const double inv_std = 1.0 / std::sqrt(var + eps);
    const double e = training ? sum_error * (1.0 + (sum_sq / M) / var) : 4 * kU * (1.0 + 2 * std::abs(mean) * inv_std);
    double sum_dy = 0, sum_dy_xhat = 0, sum_abs_dy = 0, sum_abs_dy_xhat = 0, sum_abs_dy_1xhat = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t p = 0; p < P; ++p) {
        const double d = dy[at(n, p)], xhat = (x[at(n, p)] - mean) * inv_std;
        sum_dy += d;
        sum_dy_xhat += d * xhat;
        sum_abs_dy += std::abs(d);
        sum_abs_dy_xhat += std::abs(d * xhat);
        sum_abs_dy_1xhat += std::abs(d) * (1.0 + std::abs(xhat));
      }
    r.dgamma.value[c] = sum_dy_xhat;
    r.dgamma.tolerance[c] = sum_error * sum_abs_dy_xhat + e * sum_abs_dy_1xhat;
    r.dbeta.value[c] = sum_dy;
    r.dbeta.tolerance[c] = sum_error * sum_abs_dy;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t p = 0; p < P; ++p) {
        const size_t i = at(n, p);
        const double xhat = (x[i] - mean) * inv_std;
        r.y.value[i] = gamma[c] * xhat + beta[c];
        r.y.tolerance[i] = std::abs(gamma[c]) * e * (1.0 + std::abs(xhat)) +
                           2 * kU * (std::abs(r.y.value[i]) + std::abs(beta[c]));
        if (training) {
          r.dx.value[i] = gamma[c] * inv_std * (dy[i] - sum_dy / M - xhat * sum_dy_xhat / M);
          r.dx.tolerance[i] = std::abs(gamma[c]) * inv_std * e *
                                  (std::abs(dy[i]) + sum_abs_dy / M +
                                   (1.0 + std::abs(xhat)) * (sum_abs_dy_xhat / M + sum_abs_dy_1xhat / M)) +
                              4 * kU * std::abs(r.dx.value[i]);
        } else {
          r.dx.value[i] = gamma[c] * inv_std * dy[i];
          r.dx.tolerance[i] = 4 * kU * std::abs(r.dx.value[i]);
        }
      }
  }
  return r;
}

class ActivationSweep : public ::testing::TestWithParam<Shape>, public SweepTest {};

TEST_P(ActivationSweep, BatchNormForwardAndBackwardInEveryLayout) {
  const Shape& s = GetParam();
  const int64_t C = s[1];
  constexpr float eps = 1e-5f;
  // Values around a per-channel offset, so that the mean matters; gamma away from 0.
  Tensor x = random_tensor(s, 21);
  {
    const std::vector<float> offsets = random_tensor({C}, 22).to_vector();
    float* p = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) p[i] += offsets[static_cast<size_t>((i / (s[2] * s[3])) % C)];
  }
  const Tensor dy = random_tensor(s, 23), gamma = random_tensor({C}, 24, 0.5f, 1.5f), beta = random_tensor({C}, 25);
  // Trained-ish running statistics for eval mode.
  const Tensor running_mean = random_tensor({C}, 26, -0.5f, 0.5f), running_var = random_tensor({C}, 27, 0.2f, 2.0f);
  for (const bool training : {true, false}) {
    const BnReferences ref = naive_batch_norm(s, as_doubles(x), as_doubles(dy), as_doubles(gamma), as_doubles(beta),
                                              as_doubles(running_mean), as_doubles(running_var), training, eps);
    for (const tag mode : kModes) {
      const std::string where = shape_name(s) + (training ? " training " : " eval ") + layout_name(mode);
      SCOPED_TRACE(where);
      const tag layout = layout_for(mode, C);
      if (mode != tag::undef) {
        ASSERT_EQ(layout_name(layout), layout_name(mode));
      }
      const ForcedLayout forced(mode);
      const Tensor x_in = cpu::copy_in_layout(x, layout), dy_in = cpu::copy_in_layout(dy, layout);
      const ops::BatchNormResult f =
          backend().batch_norm_forward(x_in, gamma, beta, training, running_mean, running_var, eps);
      EXPECT_LAYOUT(f.out, layout) << "forward";
      const ops::BatchNormGrads gr =
          backend().batch_norm_backward(dy_in, x_in, gamma, beta, training, f.mean, f.variance, eps);
      EXPECT_LAYOUT(gr.grad_x, layout) << "backward";
      expect_within(f.out, ref.y.value, ref.y.tolerance, where + " forward");
      expect_within(gr.grad_x, ref.dx.value, ref.dx.tolerance, where + " grad x");
      expect_within(gr.grad_gamma, ref.dgamma.value, ref.dgamma.tolerance, where + " grad gamma");
      expect_within(gr.grad_beta, ref.dbeta.value, ref.dbeta.tolerance, where + " grad beta");

      // BatchNorm with the ReLU fused (oneDNN's fuse_norm_relu) equals relu(batch_norm) and
      // batch_norm_backward(relu_backward), the kernels just checked, bit for bit.
      const ops::BatchNormReluResult fr =
          fused().batch_norm_relu_forward(x_in, gamma, beta, training, running_mean, running_var, eps);
      EXPECT_LAYOUT(fr.batch_norm.out, layout) << "fused forward";
      const Tensor relu_out = backend().relu_forward(f.out);
      expect_bitwise(fr.batch_norm.out, relu_out.to_vector(), where + " batch_norm_relu forward");
      expect_bitwise(fr.batch_norm.mean, f.mean.to_vector(), where + " batch_norm_relu mean");
      expect_bitwise(fr.batch_norm.variance, f.variance.to_vector(), where + " batch_norm_relu variance");
      const ops::BatchNormGrads fg = fused().batch_norm_relu_backward(dy_in, fr, x_in, gamma, beta, training, eps);
      const ops::BatchNormGrads cg = backend().batch_norm_backward(backend().relu_backward(dy_in, relu_out), x_in, gamma,
                                                                   beta, training, f.mean, f.variance, eps);
      EXPECT_LAYOUT(fg.grad_x, layout) << "fused backward";
      expect_bitwise(fg.grad_x, cg.grad_x.to_vector(), where + " batch_norm_relu grad x");
      expect_bitwise(fg.grad_gamma, cg.grad_gamma.to_vector(), where + " batch_norm_relu grad gamma");
      expect_bitwise(fg.grad_beta, cg.grad_beta.to_vector(), where + " batch_norm_relu grad beta");
    }
  }
}

TEST_P(ActivationSweep, ResidualAddAndReluInEveryLayout) {
  const Shape& s = GetParam();
  const Tensor a = random_tensor(s, 31), b = random_tensor(s, 32), dy = random_tensor(s, 33);
  const std::vector<float> av = a.to_vector(), bv = b.to_vector(), dyv = dy.to_vector();
  std::vector<float> sum(av.size()), relu(av.size()), relu_grad(av.size());
  for (size_t i = 0; i < av.size(); ++i) {
    sum[i] = av[i] + bv[i];
    relu[i] = std::max(0.0f, sum[i]);
    relu_grad[i] = sum[i] > 0 ? dyv[i] : 0.0f;
  }
  for (const tag mode : kModes) {
    const std::string where = shape_name(s) + " " + layout_name(mode);
    SCOPED_TRACE(where);
    const tag layout = layout_for(mode, s[1]);
    const ForcedLayout forced(mode);
    const Tensor a_in = cpu::copy_in_layout(a, layout), b_in = cpu::copy_in_layout(b, layout);
    const Tensor y = backend().add(a_in, b_in);
    const Tensor y_mixed = backend().add(a, b_in);  // one operand plain (an input image, say)
    const Tensor r = backend().relu_forward(y);
    const Tensor dr = backend().relu_backward(cpu::copy_in_layout(dy, layout), r);
    const Tensor fused_r = fused().add_relu(a_in, b_in), fused_r_mixed = fused().add_relu(a, b_in);
    // The sum of a gradient that reaches a tensor by two paths (a block's input feeds its
    // first convolution and its shortcut): into += from, in each combination of layouts.
    const Tensor into_kept = cpu::copy_in_layout(a, layout), into_plain = a.clone();
    const Tensor into_other = cpu::copy_in_layout(a, layout == tag::nhwc ? tag::nChw8c : tag::nhwc);
    backend().accumulate(into_kept, b_in);
    backend().accumulate(into_plain, b_in);
    backend().accumulate(into_other, b_in);
    // The convolutions' layout is kept through the residual add, its ReLU and their backward.
    EXPECT_LAYOUT(y, layout) << "add";
    EXPECT_LAYOUT(y_mixed, layout) << "add of a plain and a laid-out operand";
    EXPECT_LAYOUT(r, layout) << "relu";
    EXPECT_LAYOUT(fused_r, layout) << "add_relu";
    EXPECT_LAYOUT(fused_r_mixed, layout) << "add_relu of a plain and a laid-out operand";
    EXPECT_LAYOUT(dr, layout) << "relu backward";
    EXPECT_LAYOUT(into_kept, layout) << "accumulate";
    EXPECT_LAYOUT(into_plain, tag::nchw) << "accumulate into plain";
    expect_bitwise(y, sum, where + " add");
    expect_bitwise(y_mixed, sum, where + " add, one operand plain");
    expect_bitwise(r, relu, where + " relu");
    expect_bitwise(fused_r, relu, where + " add_relu");
    expect_bitwise(fused_r_mixed, relu, where + " add_relu, one operand plain");
    expect_bitwise(dr, relu_grad, where + " relu backward");
    expect_bitwise(into_kept, sum, where + " accumulate");
    expect_bitwise(into_plain, sum, where + " accumulate into plain");
    expect_bitwise(into_other, sum, where + " accumulate into another layout");
  }
}

TEST_P(ActivationSweep, GlobalAveragePoolInEveryLayout) {
  const Shape& s = GetParam();
  const int64_t N = s[0], C = s[1], P = s[2] * s[3];
  const Tensor x = random_tensor(s, 41), dy = random_tensor({N, C, 1, 1}, 42);
  const std::vector<double> xv = as_doubles(x), dyv = as_doubles(dy);
  Reference y(static_cast<size_t>(N * C)), dx(xv.size());
  for (int64_t nc = 0; nc < N * C; ++nc) {
    for (int64_t p = 0; p < P; ++p) {
      y.value[nc] += xv[nc * P + p] / static_cast<double>(P);
      y.magnitude[nc] += std::abs(xv[nc * P + p]) / static_cast<double>(P);
      dx.value[nc * P + p] = dyv[nc] / static_cast<double>(P);
    }
  }
  for (const tag mode : kModes) {
    const std::string where = shape_name(s) + " " + layout_name(mode);
    SCOPED_TRACE(where);
    const tag layout = layout_for(mode, C);
    const ForcedLayout forced(mode);
    const Tensor out = backend().global_avg_pool2d_forward(cpu::copy_in_layout(x, layout));
    const Tensor grad = backend().global_avg_pool2d_backward(cpu::copy_in_layout(dy, layout), s);
    expect_near_reference(out, y, static_cast<double>(P + 1), where + " forward");
    // Each gradient is one quotient dy / P (or dy * (1 / P): two roundings).
    expect_near_reference(grad, dx, 0.0, where + " backward", 2.0);
  }
}

// Max and average pooling (not in this ResNet-18, which has none, but in the lesson's and in
// LeNet), non-overlapping and overlapping windows.
struct PoolCase {
  ops::PoolKind kind;
  int kernel, stride;
};
TEST_P(ActivationSweep, PoolingInEveryLayout) {
  const Shape& s = GetParam();
  const int64_t N = s[0], C = s[1], H = s[2], W = s[3];
  for (const PoolCase pc : {PoolCase{ops::PoolKind::max, 2, 2}, PoolCase{ops::PoolKind::max, 3, 2},
                            PoolCase{ops::PoolKind::avg, 2, 2}, PoolCase{ops::PoolKind::avg, 3, 1}}) {
    if (pc.kernel > H) continue;
    const int64_t OH = (H - pc.kernel) / pc.stride + 1, OW = (W - pc.kernel) / pc.stride + 1;
    const Shape out{N, C, OH, OW};
    const Tensor x = random_tensor(s, 51), dy = random_tensor(out, 52);
    const std::vector<double> xv = as_doubles(x), dyv = as_doubles(dy);
    const double area = static_cast<double>(pc.kernel * pc.kernel);
    Reference y(static_cast<size_t>(N * C * OH * OW)), dx(xv.size());
    for (int64_t nc = 0; nc < N * C; ++nc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const size_t yi = static_cast<size_t>((nc * OH + oh) * OW + ow);
          size_t best = 0;
          double best_value = -1e300;
          for (int64_t kh = 0; kh < pc.kernel; ++kh)
            for (int64_t kw = 0; kw < pc.kernel; ++kw) {
              const size_t xi = static_cast<size_t>((nc * H + oh * pc.stride + kh) * W + ow * pc.stride + kw);
              if (xv[xi] > best_value) best_value = xv[xi], best = xi;
              if (pc.kind == ops::PoolKind::avg) {
                y.value[yi] += xv[xi] / area;
                y.magnitude[yi] += std::abs(xv[xi]) / area;
                dx.value[xi] += dyv[yi] / area;
                dx.magnitude[xi] += std::abs(dyv[yi]) / area;
              }
            }
          if (pc.kind == ops::PoolKind::max) {
            y.value[yi] = best_value;
            dx.value[best] += dyv[yi];
            dx.magnitude[best] += std::abs(dyv[yi]);
          }
        }
    for (const tag mode : kModes) {
      const std::string where = shape_name(s) + (pc.kind == ops::PoolKind::max ? " max " : " avg ") +
                                std::to_string(pc.kernel) + "/" + std::to_string(pc.stride) + " " + layout_name(mode);
      SCOPED_TRACE(where);
      const tag layout = layout_for(mode, C);
      const ForcedLayout forced(mode);
      const ops::PoolResult f = backend().pool2d_forward(cpu::copy_in_layout(x, layout), pc.kind, pc.kernel, pc.stride, out);
      EXPECT_LAYOUT(f.out, layout) << "forward";
      const Tensor grad =
          backend().pool2d_backward(cpu::copy_in_layout(dy, layout), f, pc.kind, pc.kernel, pc.stride, s);
      EXPECT_LAYOUT(grad, layout) << "backward";
      // The maximum is one of its inputs, exactly; its gradient sums at most
      // ceil(k / stride)^2 = 4 upstream values; the average k^2 terms.
      expect_near_reference(f.out, y, pc.kind == ops::PoolKind::max ? 0.0 : area + 1, where + " forward");
      expect_near_reference(grad, dx, pc.kind == ops::PoolKind::max ? 4.0 : area + 1, where + " backward");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ResNet18, ActivationSweep, ::testing::ValuesIn(kActivations),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           return std::to_string(info.param[1]) + "ch_" + std::to_string(info.param[2]) + "x" +
                                  std::to_string(info.param[3]);
                         });

}  // namespace
