// Forward values of the ops against hand-computed results and naive reference loops, and
// the exact error messages for shapes a user can get wrong.
//
// Float tolerance: the references accumulate in double; the ops in float32 with at most
// ~50 terms of magnitude <= 1 per output, so their error is below 50 * 6e-8 * |terms| ~ 3e-6.
// kTol = 1e-5 (absolute, on values of O(1)) leaves room for oneDNN's summation order while
// failing any indexing bug, which is O(0.1-1).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "dpt/core/random.h"
#include "dpt/core/tensor.h"
#include "dpt/ops/adaptive_bins.h"
#include "dpt/ops/cpu/layout.h"
#include "dpt/ops/ops.h"
#include "test_support.h"

using dpt::DType;
using dpt::Shape;
using dpt::Tensor;
using ::testing::HasSubstr;
namespace ops = dpt::ops;

namespace {
using dpt::testing_support::random_tensor;

constexpr double kTol = 1e-5;

void expect_values_near(const Tensor& actual, const std::vector<double>& expected, double tol = kTol) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size()));
  const float* a = actual.data<float>();
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(a[i], expected[i], tol) << "element " << i;
}

// ---------------------------------------------------------------------------------------
// conv2d against the textbook loop nest

std::vector<double> naive_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, int stride, int pad) {
  const int64_t n_ = x.dim(0), c_ = x.dim(1), h_ = x.dim(2), w_ = x.dim(3);
  const int64_t o_ = w.dim(0), kh_ = w.dim(2), kw_ = w.dim(3);
  const int64_t oh_ = (h_ + 2 * pad - kh_) / stride + 1, ow_ = (w_ + 2 * pad - kw_) / stride + 1;
  const float* px = x.data<float>();
  const float* pw = w.data<float>();
  std::vector<double> out;
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t o = 0; o < o_; ++o)
      for (int64_t oh = 0; oh < oh_; ++oh)
        for (int64_t ow = 0; ow < ow_; ++ow) {
          double sum = b.defined() ? b.data<float>()[o] : 0.0;
          for (int64_t c = 0; c < c_; ++c)
            for (int64_t kh = 0; kh < kh_; ++kh)
              for (int64_t kw = 0; kw < kw_; ++kw) {
                const int64_t ih = oh * stride - pad + kh, iw = ow * stride - pad + kw;
                if (ih < 0 || ih >= h_ || iw < 0 || iw >= w_) continue;  // zero padding
                sum += static_cast<double>(px[((n * c_ + c) * h_ + ih) * w_ + iw]) *
                       pw[((o * c_ + c) * kh_ + kh) * kw_ + kw];
              }
          out.push_back(sum);
        }
  return out;
}

struct ConvCase {
  Shape x, w;
  int stride, pad;
  bool bias;
};

TEST(Conv2dForward, MatchesNaiveLoops) {
  const std::vector<ConvCase> cases{
      {{2, 3, 6, 6}, {4, 3, 3, 3}, 1, 0, true},   // plain
      {{2, 3, 6, 6}, {4, 3, 3, 3}, 1, 0, false},  // no bias
      {{1, 2, 5, 5}, {3, 2, 3, 3}, 2, 1, true},   // stride 2, padding 1
      {{2, 2, 7, 6}, {2, 2, 3, 3}, 2, 1, true},   // non-square, floor in both axes
      {{1, 3, 4, 9}, {2, 3, 2, 4}, 1, 2, true},   // non-square kernel, padding 2
      {{3, 1, 8, 8}, {5, 1, 5, 5}, 3, 0, false},  // stride 3
      {{2, 4, 3, 3}, {6, 4, 1, 1}, 1, 0, true},   // 1x1
      // Under the backend's rule (layout.cc) on AVX-512 the cases above run channels-last
      // (a channel count that leaves a 16-channel block partly empty), this one in the
      // 16-channel block (both counts fill it); on AVX2 all in oneDNN's 8-channel block. The
      // loop below also forces every layout, and ops_layout_sweep_test checks ResNet-18's shapes.
      {{2, 16, 5, 5}, {32, 16, 3, 3}, 1, 1, true},
      // One input channel, stride 1, no padding, <= 32 output channels: on AVX-512 the
      // backend's own kernel (single_channel_conv.cc), LeNet's conv1 first; channel counts
      // in one register (5), in two (20, 31), and a 5x5 kernel on a non-square image.
      {{3, 1, 28, 28}, {20, 1, 3, 3}, 1, 0, true},
      {{2, 1, 7, 9}, {5, 1, 3, 3}, 1, 0, false},
      {{2, 1, 9, 8}, {31, 1, 5, 5}, 1, 0, true},
  };
  using tag = dnnl::memory::format_tag;
  for (const tag layout : {tag::undef, tag::nchw, tag::nhwc, tag::nChw8c, tag::nChw16c}) {
    ops::cpu::force_activation_layout(layout);  // undef: the backend's rule
    uint64_t seed = 1;
    for (const ConvCase& c : cases) {
      SCOPED_TRACE("x " + dpt::shape_str(c.x) + " w " + dpt::shape_str(c.w) + " stride " + std::to_string(c.stride) +
                   " pad " + std::to_string(c.pad) + (c.bias ? " bias" : " no bias") + " forced layout " +
                   std::to_string(static_cast<int>(layout)));
      const Tensor x = random_tensor(c.x, seed++), w = random_tensor(c.w, seed++);
      const Tensor b = c.bias ? random_tensor({c.w[0]}, seed++) : Tensor();
      const Tensor y = ops::conv2d(x, w, b, c.stride, c.pad);
      if (layout != tag::undef) {
        EXPECT_EQ(ops::cpu::activation_layout_of(y), layout);
      }
      const Shape expected_shape{c.x[0], c.w[0], (c.x[2] + 2 * c.pad - c.w[2]) / c.stride + 1,
                                 (c.x[3] + 2 * c.pad - c.w[3]) / c.stride + 1};
      ASSERT_EQ(y.shape(), expected_shape);
      expect_values_near(y, naive_conv2d(x, w, b, c.stride, c.pad));
    }
  }
  ops::cpu::force_activation_layout(dnnl::memory::format_tag::undef);
}

TEST(Conv2dForward, HandComputedWithPadding) {
  // 2x2 input, 2x2 all-ones kernel, padding 1 -> 3x3 of sums over the overlap, plus bias 10.
  const Tensor x = Tensor::from_vector({1, 2, 3, 4}, {1, 1, 2, 2});
  const Tensor w = Tensor::full({1, 1, 2, 2}, 1.0f);
  const Tensor b = Tensor::from_vector({10}, {1});
  const Tensor y = ops::conv2d(x, w, b, 1, 1);
  ASSERT_EQ(y.shape(), (Shape{1, 1, 3, 3}));
  expect_values_near(y, {11, 13, 12, 14, 20, 16, 13, 17, 14});
}

// ---------------------------------------------------------------------------------------
// pools on a known 4x4 input: 1..16 row-major

Tensor one_to_sixteen() {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i + 1);
  return Tensor::from_vector(v, {1, 1, 4, 4});
}

TEST(PoolForward, MaxKernel2Stride2) {
  const Tensor y = ops::max_pool2d(one_to_sixteen(), 2, 2);
  ASSERT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  expect_values_near(y, {6, 8, 14, 16});
}

TEST(PoolForward, AvgKernel2Stride2) {
  const Tensor y = ops::avg_pool2d(one_to_sixteen(), 2, 2);
  ASSERT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  expect_values_near(y, {3.5, 5.5, 11.5, 13.5});
}

TEST(PoolForward, MaxKernel3Stride1) {
  const Tensor y = ops::max_pool2d(one_to_sixteen(), 3, 1);
  ASSERT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  expect_values_near(y, {11, 12, 15, 16});
}

TEST(PoolForward, AvgKernel3Stride1) {
  // Window means: the centre elements 6, 7, 10, 11.
  const Tensor y = ops::avg_pool2d(one_to_sixteen(), 3, 1);
  ASSERT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  expect_values_near(y, {6, 7, 10, 11});
}

TEST(PoolForward, NegativeValuesAndChannelsStayApart) {
  // Two channels: the second is the negation of the first, so max picks the other corner.
  std::vector<float> v(32);
  for (int i = 0; i < 16; ++i) {
    v[i] = static_cast<float>(i + 1);
    v[16 + i] = -static_cast<float>(i + 1);
  }
  const Tensor y = ops::max_pool2d(Tensor::from_vector(v, {1, 2, 4, 4}), 2, 2);
  ASSERT_EQ(y.shape(), (Shape{1, 2, 2, 2}));
  expect_values_near(y, {6, 8, 14, 16, -1, -3, -9, -11});
}

TEST(PoolForward, OddInputTakesTheFloor) {
  // 5x5 input (1..25), kernel 2 stride 2 -> 2x2; row 4 and column 4 are never read.
  std::vector<float> v(25);
  for (int i = 0; i < 25; ++i) v[i] = static_cast<float>(i + 1);
  const Tensor x = Tensor::from_vector(v, {1, 1, 5, 5});
  const Tensor max = ops::max_pool2d(x, 2, 2);
  ASSERT_EQ(max.shape(), (Shape{1, 1, 2, 2}));
  expect_values_near(max, {7, 9, 17, 19});
  expect_values_near(ops::avg_pool2d(x, 2, 2), {4, 6, 14, 16});
}

// ---------------------------------------------------------------------------------------
// relu, linear, matmul, add, reshape

TEST(ReluForward, ClampsNegatives) {
  const Tensor y = ops::relu(Tensor::from_vector({-2.0f, -0.5f, 0.0f, 0.5f, 3.0f, -1e-30f}, {2, 3}));
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.to_vector(), (std::vector<float>{0, 0, 0, 0.5f, 3, 0}));
}

std::vector<double> naive_matmul(const Tensor& a, const Tensor& b, bool b_transposed) {
  const int64_t m = a.dim(0), k = a.dim(1), n = b_transposed ? b.dim(0) : b.dim(1);
  std::vector<double> out;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const float bv = b_transposed ? b.data<float>()[j * k + p] : b.data<float>()[p * n + j];
        sum += static_cast<double>(a.data<float>()[i * k + p]) * bv;
      }
      out.push_back(sum);
    }
  return out;
}

TEST(LinearForward, MatchesNaiveWithAndWithoutBias) {
  const Tensor x = random_tensor({5, 7}, 20), w = random_tensor({3, 7}, 21), b = random_tensor({3}, 22);
  std::vector<double> expected = naive_matmul(x, w, /*b_transposed=*/true);
  const Tensor no_bias = ops::linear(x, w, Tensor());
  ASSERT_EQ(no_bias.shape(), (Shape{5, 3}));
  expect_values_near(no_bias, expected);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] += b.data<float>()[i % 3];
  expect_values_near(ops::linear(x, w, b), expected);
}

TEST(LinearForward, HandComputed) {
  // x = [1, 2], W = [[1, 0], [0, 1], [1, 1]], b = [0.5, -0.5, 0] -> [1.5, 1.5, 3].
  const Tensor y = ops::linear(Tensor::from_vector({1, 2}, {1, 2}), Tensor::from_vector({1, 0, 0, 1, 1, 1}, {3, 2}),
                               Tensor::from_vector({0.5f, -0.5f, 0}, {3}));
  expect_values_near(y, {1.5, 1.5, 3});
}

TEST(MatmulForward, MatchesNaive) {
  const Tensor a = random_tensor({4, 6}, 30), b = random_tensor({6, 3}, 31);
  const Tensor c = ops::matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{4, 3}));
  expect_values_near(c, naive_matmul(a, b, false));
}

TEST(MatmulForward, HandComputed) {
  const Tensor c =
      ops::matmul(Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}), Tensor::from_vector({7, 8, 9, 10, 11, 12}, {3, 2}));
  expect_values_near(c, {58, 64, 139, 154});
}

TEST(AddForward, Elementwise) {
  const Tensor c = ops::add(Tensor::from_vector({1, 2, 3, 4}, {2, 2}), Tensor::from_vector({10, 20, 30, 40}, {2, 2}));
  EXPECT_EQ(c.shape(), (Shape{2, 2}));
  EXPECT_EQ(c.to_vector(), (std::vector<float>{11, 22, 33, 44}));
}

TEST(ReshapeForward, InferredDimensionAndSharedStorage) {
  Tensor x = random_tensor({2, 3, 4}, 40);
  const Tensor y = ops::reshape(x, {-1, 4});
  EXPECT_EQ(y.shape(), (Shape{6, 4}));
  EXPECT_EQ(y.to_vector(), x.to_vector());
  EXPECT_EQ(ops::reshape(x, {4, -1}).shape(), (Shape{4, 6}));
  EXPECT_EQ(ops::reshape(x, {2, -1, 2}).shape(), (Shape{2, 6, 2}));
  // A view: writing through it changes the original.
  y.data<float>()[5] = 123.0f;
  EXPECT_EQ(x.data<float>()[5], 123.0f);
  EXPECT_EQ(x.shape(), (Shape{2, 3, 4}));  // the original keeps its shape
}

TEST(ReshapeForward, Flatten) {
  const Tensor x = random_tensor({2, 3, 2, 2}, 41);
  const Tensor y = ops::flatten(x);
  EXPECT_EQ(y.shape(), (Shape{2, 12}));
  EXPECT_EQ(y.to_vector(), x.to_vector());
}

// ---------------------------------------------------------------------------------------
// cross_entropy, argmax, count_correct

TEST(CrossEntropyForward, UniformLogitsGiveLogK) {
  const Tensor logits = Tensor::full({3, 10}, 0.7f);
  const Tensor labels = Tensor::from_labels({0, 4, 9});
  const Tensor none = ops::cross_entropy(logits, labels, ops::Reduction::none);
  ASSERT_EQ(none.shape(), (Shape{3}));
  expect_values_near(none, {std::log(10.0), std::log(10.0), std::log(10.0)});
  const Tensor sum = ops::cross_entropy(logits, labels, ops::Reduction::sum);
  ASSERT_EQ(sum.shape(), (Shape{1}));
  EXPECT_NEAR(sum.item(), 3 * std::log(10.0), kTol);
  EXPECT_NEAR(ops::cross_entropy(logits, labels, ops::Reduction::mean).item(), std::log(10.0), kTol);
  EXPECT_NEAR(ops::cross_entropy(logits, labels).item(), std::log(10.0), kTol);  // mean by default
}

TEST(CrossEntropyForward, KnownLogits) {
  // loss_i = log(sum_j exp(z_ij)) - z_i,y_i.
  const Tensor logits = Tensor::from_vector({1, 2, 3, -1, 0, 4}, {2, 3});
  const Tensor labels = Tensor::from_labels({2, 0});
  const double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double lse1 = std::log(std::exp(-1.0) + std::exp(0.0) + std::exp(4.0));
  const double l0 = lse0 - 3.0, l1 = lse1 - (-1.0);
  expect_values_near(ops::cross_entropy(logits, labels, ops::Reduction::none), {l0, l1});
  EXPECT_NEAR(ops::cross_entropy(logits, labels, ops::Reduction::sum).item(), l0 + l1, kTol);
  EXPECT_NEAR(ops::cross_entropy(logits, labels, ops::Reduction::mean).item(), (l0 + l1) / 2, kTol);
}

TEST(CrossEntropyForward, LargeLogitsStayFinite) {
  // exp(1000) overflows float and double; the max shift must keep this exact.
  const Tensor logits = Tensor::from_vector({1000, 0, -1000, 1000}, {2, 2});
  const Tensor per_example = ops::cross_entropy(logits, Tensor::from_labels({1, 1}), ops::Reduction::none);
  const std::vector<float> v = per_example.to_vector();
  EXPECT_NEAR(v[0], 1000.0, 1e-3);
  EXPECT_NEAR(v[1], 0.0, kTol);
}

TEST(ArgmaxForward, KnownRows) {
  const Tensor x = Tensor::from_vector({0.1f, 0.9f, 0.3f, -5, -1, -3, 2, 1, 0}, {3, 3});
  const Tensor idx = ops::argmax(x);
  ASSERT_EQ(idx.dtype(), DType::i64);
  ASSERT_EQ(idx.shape(), (Shape{3}));
  EXPECT_EQ(std::vector<int64_t>(idx.data<int64_t>(), idx.data<int64_t>() + 3), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(ops::count_correct(x, Tensor::from_labels({1, 1, 0})), 3);
  EXPECT_EQ(ops::count_correct(x, Tensor::from_labels({1, 2, 2})), 1);
  EXPECT_EQ(ops::count_correct(x, Tensor::from_labels({0, 0, 1})), 0);
}

// ---------------------------------------------------------------------------------------
// errors a user can cause: std::invalid_argument naming the op and the shapes

TEST(OpErrors, Conv2dChannelMismatch) {
  EXPECT_INVALID_ARGUMENT(ops::conv2d(Tensor::zeros({1, 3, 5, 5}), Tensor::zeros({2, 2, 3, 3}), Tensor()),
                          "conv2d: input [1, 3, 5, 5] has 3 channels but weight [2, 2, 3, 3] expects 2");
}

TEST(OpErrors, Conv2dBiasAndKernelSize) {
  EXPECT_INVALID_ARGUMENT(ops::conv2d(Tensor::zeros({1, 2, 5, 5}), Tensor::zeros({4, 2, 3, 3}), Tensor::zeros({3})),
                          "conv2d: bias [3] does not match weight [4, 2, 3, 3]");
  EXPECT_INVALID_ARGUMENT(ops::conv2d(Tensor::zeros({1, 1, 2, 2}), Tensor::zeros({1, 1, 3, 3}), Tensor()),
                          "conv2d: kernel [1, 1, 3, 3] is larger than the padded input [1, 1, 2, 2]");
  EXPECT_INVALID_ARGUMENT(ops::conv2d(Tensor::zeros({1, 5, 5}), Tensor::zeros({1, 1, 3, 3}), Tensor()),
                          "conv2d: input must have 4 dimensions, got shape [1, 5, 5]");
}

TEST(OpErrors, PoolWindowLargerThanInput) {
  EXPECT_INVALID_ARGUMENT(ops::max_pool2d(Tensor::zeros({1, 1, 2, 2}), 3, 1),
                          "max_pool2d: window 3 is larger than the input [1, 1, 2, 2]");
  EXPECT_INVALID_ARGUMENT(ops::avg_pool2d(Tensor::zeros({1, 1, 2, 2}), 3, 1),
                          "avg_pool2d: window 3 is larger than the input [1, 1, 2, 2]");
}

TEST(OpErrors, LinearFeatureMismatch) {
  EXPECT_INVALID_ARGUMENT(ops::linear(Tensor::zeros({2, 4}), Tensor::zeros({3, 5}), Tensor()),
                          "linear: input [2, 4] has 4 features but weight [3, 5] expects 5");
  EXPECT_INVALID_ARGUMENT(ops::linear(Tensor::zeros({2, 4}), Tensor::zeros({3, 4}), Tensor::zeros({4})),
                          "linear: bias [4] does not match weight [3, 4]");
}

TEST(OpErrors, MatmulInnerDimensionMismatch) {
  EXPECT_INVALID_ARGUMENT(ops::matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})),
                          "matmul: cannot multiply [2, 3] by [4, 5]");
}

TEST(OpErrors, AddShapeMismatch) {
  EXPECT_INVALID_ARGUMENT(ops::add(Tensor::zeros({2, 3}), Tensor::zeros({3, 2})),
                          "add: shapes [2, 3] and [3, 2] differ (no broadcasting)");
}

TEST(OpErrors, ReshapeWrongElementCount) {
  EXPECT_INVALID_ARGUMENT(ops::reshape(Tensor::zeros({2, 3}), {4, 2}),
                          "reshape: cannot view [2, 3] (6 elements) as [4, 2]");
  // The message shows the shape as requested, not with -1 already (wrongly) resolved to 1.
  EXPECT_INVALID_ARGUMENT(ops::reshape(Tensor::zeros({2, 3}), {4, -1}),
                          "reshape: cannot view [2, 3] (6 elements) as [4, -1]");
  EXPECT_INVALID_ARGUMENT(ops::reshape(Tensor::zeros({2, 3}), {-1, -1}), "reshape: only one dimension may be -1");
}

TEST(OpErrors, CrossEntropyLabelOutOfRange) {
  const Tensor logits = Tensor::zeros({3, 4});
  EXPECT_INVALID_ARGUMENT(ops::cross_entropy(logits, Tensor::from_labels({0, 1, 4})),
                          "cross_entropy: label 4 at index 2 is outside [0, 4)");
  EXPECT_INVALID_ARGUMENT(ops::cross_entropy(logits, Tensor::from_labels({0, -1, 2})),
                          "cross_entropy: label -1 at index 1 is outside [0, 4)");
}

TEST(OpErrors, LabelsOfWrongBatchSize) {
  EXPECT_INVALID_ARGUMENT(ops::cross_entropy(Tensor::zeros({2, 3}), Tensor::from_labels({0, 1, 2})),
                          "cross_entropy: logits [2, 3] and labels [3] disagree on the batch size");
  EXPECT_INVALID_ARGUMENT(ops::count_correct(Tensor::zeros({2, 3}), Tensor::from_labels({0})),
                          "count_correct: logits [2, 3] and labels [1] disagree on the batch size");
}

TEST(OpErrors, LabelsOfWrongType) {
  EXPECT_INVALID_ARGUMENT(ops::cross_entropy(Tensor::zeros({2, 3}), Tensor::zeros({2})),
                          "cross_entropy: labels must be a 1-D int64 tensor");
}

// ---------------------------------------------------------------------------------------
// batch_norm2d, global_avg_pool2d

// Per-channel mean and biased variance of y [N, C, H, W], in double.
struct ChannelStats {
  std::vector<double> mean, variance;
};
ChannelStats channel_stats(const Tensor& y) {
  const int64_t n_ = y.dim(0), c_ = y.dim(1), hw = y.dim(2) * y.dim(3);
  const float* p = y.data<float>();
  ChannelStats s{std::vector<double>(c_, 0.0), std::vector<double>(c_, 0.0)};
  for (int64_t c = 0; c < c_; ++c) {
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t i = 0; i < hw; ++i) s.mean[c] += p[(n * c_ + c) * hw + i];
    s.mean[c] /= static_cast<double>(n_ * hw);
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t i = 0; i < hw; ++i) {
        const double d = p[(n * c_ + c) * hw + i] - s.mean[c];
        s.variance[c] += d * d;
      }
    s.variance[c] /= static_cast<double>(n_ * hw);
  }
  return s;
}

TEST(BatchNormForward, TrainingHandComputed) {
  // One channel, values 1..4: mean 2.5, biased variance 1.25, unbiased 5/3.
  const Tensor x = Tensor::from_vector({1, 2, 3, 4}, {2, 1, 1, 2});
  Tensor running_mean = Tensor::zeros({1}), running_var = Tensor::full({1}, 1.0f);
  const Tensor y = ops::batch_norm2d(x, Tensor::full({1}, 2.0f), Tensor::full({1}, 1.0f), running_mean, running_var,
                                     true, 0.1f, 1e-5f);
  ASSERT_EQ(y.shape(), (Shape{2, 1, 1, 2}));
  const double inv_std = 1.0 / std::sqrt(1.25 + 1e-5);
  expect_values_near(y, {1 - 3 * inv_std, 1 - inv_std, 1 + inv_std, 1 + 3 * inv_std});
  // running = 0.9 * running + 0.1 * batch statistic (unbiased variance for running_var).
  expect_values_near(running_mean, {0.9 * 0.0 + 0.1 * 2.5});
  expect_values_near(running_var, {0.9 * 1.0 + 0.1 * (5.0 / 3.0)});
}

TEST(BatchNormForward, TrainingNormalizesEachChannelAndUpdatesRunningStatsAsPyTorch) {
  // Channels with different offsets and scales; gamma = 1, beta = 0.
  const Shape shape{4, 3, 5, 6};
  Tensor x = random_tensor(shape, 200);
  const std::vector<float> offset{3.0f, -1.0f, 0.0f}, scale{0.5f, 2.0f, 5.0f};
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = (i / 30) % 3;
    x.data<float>()[i] = x.data<float>()[i] * scale[c] + offset[c];
  }
  const ChannelStats in = channel_stats(x);
  const std::vector<float> mean0{0.5f, -1.0f, 2.0f}, var0{1.0f, 2.0f, 0.5f};
  Tensor running_mean = Tensor::from_vector(mean0, {3}), running_var = Tensor::from_vector(var0, {3});
  const float momentum = 0.3f;
  const Tensor y =
      ops::batch_norm2d(x, Tensor::full({3}, 1.0f), Tensor::zeros({3}), running_mean, running_var, true, momentum);
  ASSERT_EQ(y.shape(), shape);

  const ChannelStats out = channel_stats(y);
  const double n = 4 * 5 * 6;
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(out.mean[c], 0.0, 1e-5) << "channel " << c;
    // Biased variance v normalized with eps: v / (v + eps).
    EXPECT_NEAR(out.variance[c], in.variance[c] / (in.variance[c] + 1e-5), 1e-4) << "channel " << c;
    EXPECT_NEAR(running_mean.data<float>()[c], (1 - momentum) * mean0[c] + momentum * in.mean[c], 1e-5);
    EXPECT_NEAR(running_var.data<float>()[c], (1 - momentum) * var0[c] + momentum * in.variance[c] * n / (n - 1), 1e-4);
  }
}

TEST(BatchNormForward, EvalUsesRunningStatsAndLeavesThemAlone) {
  const Tensor x = Tensor::from_vector({1, 2, 3, 4}, {1, 2, 1, 2});
  Tensor running_mean = Tensor::from_vector({1, 2}, {2}), running_var = Tensor::from_vector({4, 0.25f}, {2});
  const Tensor gamma = Tensor::from_vector({2, -1}, {2}), beta = Tensor::from_vector({0.5f, 0}, {2});
  const Tensor y = ops::batch_norm2d(x, gamma, beta, running_mean, running_var, false);
  const double s0 = std::sqrt(4 + 1e-5), s1 = std::sqrt(0.25 + 1e-5);
  expect_values_near(y, {0.5, 2 * 1 / s0 + 0.5, -1 * 1 / s1, -1 * 2 / s1});
  expect_values_near(running_mean, {1, 2});
  expect_values_near(running_var, {4, 0.25});
}

TEST(BatchNormForward, EvalAfterTrainingUsesTheUpdatedStats) {
  const Tensor x = Tensor::from_vector({1, 2, 3, 4}, {2, 1, 1, 2});
  Tensor running_mean = Tensor::zeros({1}), running_var = Tensor::full({1}, 1.0f);
  const Tensor gamma = Tensor::full({1}, 1.0f), beta = Tensor::zeros({1});
  ops::batch_norm2d(x, gamma, beta, running_mean, running_var, true, 1.0f);  // momentum 1: the batch stats
  expect_values_near(running_mean, {2.5});
  expect_values_near(running_var, {5.0 / 3.0});
  const Tensor y = ops::batch_norm2d(x, gamma, beta, running_mean, running_var, false);
  const double s = std::sqrt(5.0 / 3.0 + 1e-5);
  expect_values_near(y, {-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s});
}

// Autograd clones a gradient before summing another into it (a residual's two branches):
// the copy keeps the backend's layout, so neither it nor the source is converted to plain.
TEST(TensorClone, KeepsABackendLayoutAndTheValues) {
  const Tensor blocked = ops::conv2d(random_tensor({2, 16, 6, 6}, 220), random_tensor({32, 16, 3, 3}, 221), Tensor(), 1, 1);
  ASSERT_NE(blocked.storage().layout(), nullptr) << "conv2d no longer leaves its own layout";
  const Tensor copy = blocked.clone();
  EXPECT_EQ(copy.storage().layout(), blocked.storage().layout());
  EXPECT_NE(copy.storage().raw_data(), blocked.storage().raw_data());
  EXPECT_EQ(copy.to_vector(), blocked.to_vector());  // each converted on reading, to the same values
}

TEST(BatchNormForward, ConvOutputInItsLayoutGivesTheSameResultAsPlain) {
  // conv2d leaves its output in its own layout (3 -> 5 channels: channels-last on AVX-512,
  // oneDNN's 8-channel block on AVX2; ops_layout_sweep_test forces each); batch norm must
  // read it as is (and keep the layout for the next kernel) and agree with the same values
  // given plain.
  const Tensor gamma = random_tensor({5}, 212), beta = random_tensor({5}, 213);
  for (const bool training : {true, false}) {
    Tensor rm_a = Tensor::zeros({5}), rv_a = Tensor::full({5}, 1.0f);
    Tensor rm_b = Tensor::zeros({5}), rv_b = Tensor::full({5}, 1.0f);
    const Tensor blocked_in =
        ops::conv2d(random_tensor({2, 3, 6, 6}, 210), random_tensor({5, 3, 3, 3}, 211), Tensor(), 1, 1);
    ASSERT_NE(blocked_in.storage().layout(), nullptr) << "conv2d no longer leaves its own layout";
    const Tensor y_blocked = ops::batch_norm2d(blocked_in, gamma, beta, rm_a, rv_a, training);
    EXPECT_NE(y_blocked.storage().layout(), nullptr) << "batch norm reordered its output to plain";
    const Tensor plain_in = Tensor::from_vector(blocked_in.clone().to_vector(), blocked_in.shape());
    ASSERT_EQ(plain_in.storage().layout(), nullptr);
    const Tensor y_plain = ops::batch_norm2d(plain_in, gamma, beta, rm_b, rv_b, training);
    const std::vector<float> a = y_blocked.to_vector(), b = y_plain.to_vector();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "element " << i;
    const std::vector<float> ma = rm_a.to_vector(), mb = rm_b.to_vector();
    const std::vector<float> va = rv_a.to_vector(), vb = rv_b.to_vector();
    for (size_t c = 0; c < 5; ++c) {
      EXPECT_NEAR(ma[c], mb[c], 1e-6);
      EXPECT_NEAR(va[c], vb[c], 1e-5);
    }
  }
}

TEST(GlobalAvgPoolForward, NonSquarePlane) {
  // Two 2x3 planes: 1..6 and 7..12.
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[i] = static_cast<float>(i + 1);
  const Tensor y = ops::global_avg_pool2d(Tensor::from_vector(v, {1, 2, 2, 3}));
  ASSERT_EQ(y.shape(), (Shape{1, 2, 1, 1}));
  expect_values_near(y, {3.5, 9.5});
}

TEST(GlobalAvgPoolForward, MatchesNaiveMeans) {
  for (const Shape& shape : {Shape{2, 3, 4, 4}, Shape{3, 9, 5, 7}, Shape{1, 2, 1, 1}}) {
    const Tensor x = random_tensor(shape, 220);
    const Tensor y = ops::global_avg_pool2d(x);
    ASSERT_EQ(y.shape(), (Shape{shape[0], shape[1], 1, 1}));
    const int64_t hw = shape[2] * shape[3];
    std::vector<double> expected;
    for (int64_t plane = 0; plane < shape[0] * shape[1]; ++plane) {
      double sum = 0.0;
      for (int64_t i = 0; i < hw; ++i) sum += x.data<float>()[plane * hw + i];
      expected.push_back(sum / static_cast<double>(hw));
    }
    expect_values_near(y, expected);
  }
}

TEST(OpErrors, BatchNormShapeMismatch) {
  const Tensor x = Tensor::zeros({2, 3, 4, 4});
  const Tensor c3 = Tensor::zeros({3}), c4 = Tensor::zeros({4});
  Tensor rm = Tensor::zeros({3}), rv = Tensor::full({3}, 1.0f), rm4 = Tensor::zeros({4}), rv4 = Tensor::zeros({4});
  EXPECT_INVALID_ARGUMENT(ops::batch_norm2d(x, c4, c3, rm, rv, true),
                          "batch_norm2d: gamma [4] does not match the 3 channels of input [2, 3, 4, 4]");
  EXPECT_INVALID_ARGUMENT(ops::batch_norm2d(x, c3, c4, rm, rv, true),
                          "batch_norm2d: beta [4] does not match the 3 channels of input [2, 3, 4, 4]");
  EXPECT_INVALID_ARGUMENT(ops::batch_norm2d(x, c3, c3, rm4, rv, false),
                          "batch_norm2d: running_mean [4] does not match the 3 channels of input [2, 3, 4, 4]");
  EXPECT_INVALID_ARGUMENT(ops::batch_norm2d(x, c3, c3, rm, rv4, false),
                          "batch_norm2d: running_var [4] does not match the 3 channels of input [2, 3, 4, 4]");
  EXPECT_INVALID_ARGUMENT(ops::batch_norm2d(x, Tensor::zeros({1, 3}), c3, rm, rv, true),
                          "batch_norm2d: gamma must have 1 dimensions, got shape [1, 3]");
  EXPECT_INVALID_ARGUMENT(ops::batch_norm2d(Tensor::zeros({2, 3}), c3, c3, rm, rv, true),
                          "batch_norm2d: input must have 4 dimensions, got shape [2, 3]");
  // A failed call leaves the running stats untouched.
  expect_values_near(rm, {0, 0, 0});
  expect_values_near(rv, {1, 1, 1});
}

TEST(OpErrors, BatchNormTrainingNeedsTwoValuesPerChannel) {
  Tensor rm = Tensor::zeros({2}), rv = Tensor::full({2}, 1.0f);
  const Tensor gamma = Tensor::full({2}, 1.0f), beta = Tensor::zeros({2});
  EXPECT_INVALID_ARGUMENT(ops::batch_norm2d(Tensor::zeros({1, 2, 1, 1}), gamma, beta, rm, rv, true),
                          "batch_norm2d: training needs more than one value per channel, got input [1, 2, 1, 1]");
  // Evaluation of a single value is fine.
  EXPECT_NO_THROW(ops::batch_norm2d(Tensor::zeros({1, 2, 1, 1}), gamma, beta, rm, rv, false));
}

TEST(OpErrors, BatchNormMomentumAndEps) {
  const Tensor x = Tensor::zeros({2, 1, 2, 2}), c = Tensor::zeros({1});
  Tensor rm = Tensor::zeros({1}), rv = Tensor::full({1}, 1.0f);
  EXPECT_INVALID_ARGUMENT(ops::batch_norm2d(x, c, c, rm, rv, true, 1.5f), "batch_norm2d: momentum must be in [0, 1]");
  EXPECT_INVALID_ARGUMENT(ops::batch_norm2d(x, c, c, rm, rv, true, 0.1f, 0.0f),
                          "batch_norm2d: eps must be a finite number > 0");
}

TEST(OpErrors, GlobalAvgPoolNeeds4D) {
  EXPECT_INVALID_ARGUMENT(ops::global_avg_pool2d(Tensor::zeros({2, 3, 4})),
                          "global_avg_pool2d: input must have 4 dimensions, got shape [2, 3, 4]");
}

// Adaptive average pooling against a naive reference: each output the mean of its bin,
// torch's [floor(i H / OH), ceil((i + 1) H / OH)); equal to avg_pool2d where OH divides H,
// and to global_avg_pool2d at 1 x 1.
TEST(AdaptiveAvgPool, EveryBinIsTheMeanOfItsRowsAndColumns) {
  const Tensor x = random_tensor({2, 3, 7, 5}, 40);
  const int64_t oh = 3, ow = 2;
  const std::vector<float> got = ops::adaptive_avg_pool2d(x, oh, ow).to_vector();
  const float* v = x.data<float>();
  for (int64_t p = 0; p < 6; ++p) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t r0 = i * 7 / oh, r1 = ((i + 1) * 7 + oh - 1) / oh;
        const int64_t c0 = j * 5 / ow, c1 = ((j + 1) * 5 + ow - 1) / ow;
        double sum = 0.0;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) sum += v[(p * 7 + r) * 5 + c];
        EXPECT_NEAR(got[(p * oh + i) * ow + j], sum / static_cast<double>((r1 - r0) * (c1 - c0)), 1e-6)
            << "plane " << p << ", bin (" << i << ", " << j << ")";
      }
    }
  }
  // The bins of 7 over 3 are [0, 3), [2, 5), [4, 7), as torch's.
  EXPECT_EQ(ops::adaptive_bin(1, 7, 3).begin, 2);
  EXPECT_EQ(ops::adaptive_bin(1, 7, 3).end, 5);
}

TEST(AdaptiveAvgPool, EqualsAvgPoolWhereTheBinsDivideAndGlobalPoolAtOne) {
  const Tensor x = random_tensor({2, 4, 8, 8}, 41);
  const std::vector<float> adaptive = ops::adaptive_avg_pool2d(x, 4, 4).to_vector();
  const std::vector<float> pooled = ops::avg_pool2d(x, 2, 2).to_vector();
  ASSERT_EQ(adaptive.size(), pooled.size());
  for (size_t i = 0; i < pooled.size(); ++i) EXPECT_NEAR(adaptive[i], pooled[i], 1e-6) << i;
  EXPECT_EQ(ops::adaptive_avg_pool2d(x, 1, 1).to_vector(), ops::global_avg_pool2d(x).to_vector());
  EXPECT_INVALID_ARGUMENT(ops::adaptive_avg_pool2d(x, 0, 2),
                          "adaptive_avg_pool2d: output size 0x2 must be at least 1x1");
}

}  // namespace
