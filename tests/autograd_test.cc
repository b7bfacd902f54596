// The autograd engine's contract (dpt/autograd/engine.h, node.h), independent of any one
// op's math: gradients accumulate until zero_grad(), every path into a tensor contributes,
// NoGradGuard records nothing, only leaves that require grad get a .grad(), gradients never
// alias each other, bad roots fail with a clear message, and deep graphs do not recurse.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "dpt/autograd/engine.h"
#include "dpt/autograd/node.h"
#include "dpt/core/random.h"
#include "dpt/core/tensor.h"
#include "dpt/ops/ops.h"
#include "test_support.h"

using dpt::Shape;
using dpt::Tensor;
using dpt::autograd::NoGradGuard;
using ::testing::HasSubstr;
namespace ops = dpt::ops;

namespace {
using dpt::testing_support::random_tensor;

// The sum of all elements as a [1, 1] tensor, built from library ops so it records a graph:
// reshape to [1, n] and multiply by a column of ones. d(sum)/dt = 1 everywhere.
Tensor sum_all(const Tensor& t) { return ops::matmul(ops::reshape(t, {1, -1}), Tensor::full({t.numel(), 1}, 1.0f)); }

void expect_all_near(const Tensor& t, const std::vector<float>& expected, float tol = 1e-5f) {
  ASSERT_TRUE(t.defined());
  ASSERT_EQ(t.numel(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(t.data<float>()[i], expected[i], tol) << "element " << i;
}

std::vector<float> scaled(const Tensor& t, float factor) {
  std::vector<float> v = t.to_vector();
  for (float& x : v) x *= factor;
  return v;
}

// loss = sum(linear(x, w, b)): d/db = N, d/dw[o][i] = sum_n x[n][i], d/dx[n][i] = sum_o w[o][i].
struct LinearProblem {
  Tensor x = random_tensor({3, 4}, 1);
  Tensor w = random_tensor({2, 4}, 2);
  Tensor b = random_tensor({2}, 3);
  LinearProblem() {
    x.set_requires_grad(true);
    w.set_requires_grad(true);
    b.set_requires_grad(true);
  }
  Tensor loss() const { return sum_all(ops::linear(x, w, b)); }
};

TEST(Autograd, SingleBackwardGivesTheExpectedGradients) {
  LinearProblem p;
  dpt::autograd::backward(p.loss());
  std::vector<float> dw(8, 0.0f), dx(12, 0.0f);
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 4; ++i)
      for (int n = 0; n < 3; ++n) {
        dw[o * 4 + i] += p.x.data<float>()[n * 4 + i];
        dx[n * 4 + i] += p.w.data<float>()[o * 4 + i];
      }
  expect_all_near(p.b.grad(), {3, 3});
  expect_all_near(p.w.grad(), dw);
  expect_all_near(p.x.grad(), dx);
  EXPECT_EQ(p.w.grad().shape(), p.w.shape());
}

TEST(Autograd, GradientsAccumulateUntilZeroGrad) {
  LinearProblem p;
  dpt::autograd::backward(p.loss());
  const Tensor gx = p.x.grad().clone(), gw = p.w.grad().clone(), gb = p.b.grad().clone();

  dpt::autograd::backward(p.loss());  // a second forward + backward adds onto the first
  expect_all_near(p.x.grad(), scaled(gx, 2));
  expect_all_near(p.w.grad(), scaled(gw, 2));
  expect_all_near(p.b.grad(), scaled(gb, 2));

  for (const Tensor* t : {&p.x, &p.w, &p.b}) t->zero_grad();
  EXPECT_FALSE(p.x.grad().defined());
  EXPECT_FALSE(p.w.grad().defined());
  EXPECT_FALSE(p.b.grad().defined());

  dpt::autograd::backward(p.loss());  // after zero_grad: one gradient again, not three
  expect_all_near(p.x.grad(), gx.to_vector());
  expect_all_near(p.w.grad(), gw.to_vector());
  expect_all_near(p.b.grad(), gb.to_vector());
}

TEST(Autograd, BackwardTwiceOnTheSameGraphAccumulates) {
  LinearProblem p;
  const Tensor loss = p.loss();
  dpt::autograd::backward(loss);
  const Tensor gw = p.w.grad().clone();
  dpt::autograd::backward(loss);
  expect_all_near(p.w.grad(), scaled(gw, 2));
}

TEST(Autograd, LeafUsedTwiceInOneOpGetsBothPaths) {
  Tensor x = random_tensor({2, 3}, 4);
  x.set_requires_grad(true);
  dpt::autograd::backward(sum_all(ops::add(x, x)));
  expect_all_near(x.grad(), std::vector<float>(6, 2.0f));
}

TEST(Autograd, IntermediateUsedTwiceGetsTheSumOfBothPaths) {
  // h = relu(x) with x > 0 feeds both operands of add: d/dx sum(h + h) = 2.
  Tensor x = random_tensor({2, 3}, 5, 0.5f, 1.0f);
  x.set_requires_grad(true);
  const Tensor h = ops::relu(x);
  dpt::autograd::backward(sum_all(ops::add(h, h)));
  expect_all_near(x.grad(), std::vector<float>(6, 2.0f));
}

TEST(Autograd, TensorUsedOnTwoDifferentPathsGetsTheirSum) {
  // x W1 + x W2 must give x the same gradient as x (W1 + W2).
  Tensor x = random_tensor({3, 4}, 6);
  const Tensor w1 = random_tensor({4, 5}, 7), w2 = random_tensor({4, 5}, 8);
  x.set_requires_grad(true);
  dpt::autograd::backward(sum_all(ops::add(ops::matmul(x, w1), ops::matmul(x, w2))));
  const Tensor two_paths = x.grad().clone();

  x.zero_grad();
  Tensor w_sum;
  {
    NoGradGuard no_grad;
    w_sum = ops::add(w1, w2);
  }
  dpt::autograd::backward(sum_all(ops::matmul(x, w_sum)));
  expect_all_near(two_paths, x.grad().to_vector());
}

TEST(Autograd, DiamondAndThreeWayReuse) {
  // h = relu(x), x > 0; y = (h + relu(h)) + h: three paths from h, so d/dx = 3.
  Tensor x = random_tensor({4}, 9, 0.5f, 1.0f);
  x.set_requires_grad(true);
  const Tensor h = ops::relu(x);
  dpt::autograd::backward(sum_all(ops::add(ops::add(h, ops::relu(h)), h)));
  expect_all_near(x.grad(), std::vector<float>(4, 3.0f));
}

TEST(Autograd, GradientsDoNotAliasEachOther) {
  // add() hands the same buffer to both operands; each leaf must still own its gradient.
  Tensor a = random_tensor({3}, 10), b = random_tensor({3}, 11);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  dpt::autograd::backward(sum_all(ops::add(a, b)));
  a.grad().data<float>()[0] = 100.0f;
  EXPECT_EQ(b.grad().data<float>()[0], 1.0f);
  EXPECT_NE(a.grad().data<float>(), b.grad().data<float>());
}

TEST(Autograd, GradientOfAReshapedLeafHasTheLeafShape) {
  Tensor x = random_tensor({2, 3, 2}, 12);
  x.set_requires_grad(true);
  const Tensor y = ops::reshape(x, {-1, 4});
  dpt::autograd::backward(sum_all(ops::add(y, y)));
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().shape(), x.shape());
  expect_all_near(x.grad(), std::vector<float>(12, 2.0f));
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  LinearProblem p;
  Tensor out;
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(dpt::autograd::grad_enabled());
    out = sum_all(ops::relu(ops::linear(p.x, p.w, p.b)));
  }
  EXPECT_TRUE(dpt::autograd::grad_enabled());
  EXPECT_FALSE(out.needs_grad());
  EXPECT_EQ(out.grad_fn(), nullptr);
  EXPECT_INVALID_ARGUMENT(dpt::autograd::backward(out), "does not depend on any tensor that requires grad");
  EXPECT_FALSE(p.w.grad().defined());

  // Recording resumes once the guard is gone.
  EXPECT_TRUE(p.loss().needs_grad());
}

TEST(Autograd, NestedNoGradGuardsRestoreThePreviousState) {
  {
    NoGradGuard outer;
    {
      NoGradGuard inner;
      EXPECT_FALSE(dpt::autograd::grad_enabled());
    }
    EXPECT_FALSE(dpt::autograd::grad_enabled());  // still inside the outer guard
  }
  EXPECT_TRUE(dpt::autograd::grad_enabled());
}

TEST(Autograd, BackwardOnANonScalarFails) {
  LinearProblem p;
  const Tensor out = ops::linear(p.x, p.w, p.b);  // [3, 2]
  EXPECT_INVALID_ARGUMENT(dpt::autograd::backward(out), "backward() needs a one-element loss tensor, got shape [3, 2]");
  EXPECT_INVALID_ARGUMENT(dpt::autograd::backward(Tensor()), "backward() needs a one-element loss tensor");
  EXPECT_FALSE(p.w.grad().defined());
}

TEST(Autograd, BackwardWithNothingRequiringGradFails) {
  const Tensor loss = sum_all(ops::relu(random_tensor({4}, 13)));
  EXPECT_FALSE(loss.needs_grad());
  EXPECT_INVALID_ARGUMENT(dpt::autograd::backward(loss), "does not depend on any tensor that requires grad");
}

TEST(Autograd, LeafNotRequiringGradGetsNoGrad) {
  const Tensor x = random_tensor({3, 4}, 14);  // data: no requires_grad
  Tensor w = random_tensor({2, 4}, 15);
  w.set_requires_grad(true);
  const Tensor b = random_tensor({2}, 16);  // frozen bias
  const Tensor y = ops::linear(x, w, b);
  dpt::autograd::backward(sum_all(y));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  EXPECT_TRUE(w.grad().defined());
  EXPECT_FALSE(y.grad().defined()) << "intermediate results keep no .grad()";
}

TEST(Autograd, DetachCutsTheGraph) {
  Tensor x = random_tensor({3, 4}, 17);
  Tensor w = random_tensor({2, 4}, 18);
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  const Tensor h = ops::relu(x).detach();
  EXPECT_FALSE(h.needs_grad());
  dpt::autograd::backward(sum_all(ops::linear(h, w, Tensor())));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_TRUE(w.grad().defined());
}

TEST(Autograd, LossThatIsALeafGetsGradOne) {
  Tensor loss = Tensor::full({1}, 3.0f);
  loss.set_requires_grad(true);
  dpt::autograd::backward(loss);
  expect_all_near(loss.grad(), {1.0f});
}

TEST(Autograd, DeepChainDoesNotOverflowTheStack) {
  // 4000 ops in sequence: neither the backward walk nor the graph's destruction at the end
  // of this scope may overflow the stack. The chain alternates add (of a constant) and
  // reshape, which run as plain loops; 4000 oneDNN calls (e.g. relu) would each start an
  // OpenMP region, which on a loaded 2-core machine made this take seconds instead of ms.
  Tensor x = random_tensor({4}, 19);
  x.set_requires_grad(true);
  const Tensor step = Tensor::full({2, 2}, 0.25f);
  {
    Tensor h = ops::reshape(x, {2, 2});
    for (int i = 0; i < 2000; ++i) h = ops::reshape(ops::add(h, step), {2, 2});
    dpt::autograd::backward(sum_all(h));
    EXPECT_NEAR(h.data<float>()[0], x.data<float>()[0] + 500.0f, 1e-3);
  }
  expect_all_near(x.grad(), std::vector<float>(4, 1.0f));
}

TEST(Autograd, ChainOfReluOps) {
  // The same through a oneDNN op, kept short: relu's backward passes 1 where x > 0.
  Tensor x = random_tensor({4}, 20, 0.5f, 1.0f);
  x.set_requires_grad(true);
  Tensor h = x;
  for (int i = 0; i < 10; ++i) h = ops::relu(h);
  dpt::autograd::backward(sum_all(h));
  expect_all_near(x.grad(), std::vector<float>(4, 1.0f));
}

}  // namespace
