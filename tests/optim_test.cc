// The optimizers against written-out reference formulas in double precision (Adam, AdamW,
// SGD with Nesterov momentum), their checks, and the API's guards against misuse: a name
// or tensor registered twice, an optimizer given another model's parameters.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "dpt/data/in_memory.h"
#include "dpt/nn/layers.h"
#include "dpt/nn/models.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "dpt/train/train_concise.h"
#include "test_support.h"

namespace dpt {
namespace {

using testing_support::error_of;

const std::vector<double> kStart = {1.0, -2.0, 0.5, 0.03};
const std::vector<std::vector<double>> kGrads = {{0.5, 0.25, -1.0, 0.0}, {-0.2, 0.1, 0.3, 1e-4}, {0.05, -0.4, 0.2, -3.0}};

// PyTorch's Adam / AdamW (torch.optim.Adam, AdamW; amsgrad off), written out in double.
std::vector<std::vector<double>> reference_adam(double lr, double b1, double b2, double eps, double decay,
                                                bool decoupled) {
  std::vector<double> p = kStart, m(p.size(), 0.0), v(p.size(), 0.0);
  std::vector<std::vector<double>> after;
  for (size_t t = 1; t <= kGrads.size(); ++t) {
    for (size_t k = 0; k < p.size(); ++k) {
      double g = kGrads[t - 1][k];
      if (decoupled) p[k] *= 1.0 - lr * decay;
      else g += decay * p[k];
      m[k] = b1 * m[k] + (1.0 - b1) * g;
      v[k] = b2 * v[k] + (1.0 - b2) * g * g;
      const double m_hat = m[k] / (1.0 - std::pow(b1, static_cast<double>(t)));
      const double v_hat = v[k] / (1.0 - std::pow(b2, static_cast<double>(t)));
      p[k] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
    after.push_back(p);
  }
  return after;
}

std::vector<std::vector<double>> run(optim::Optimizer& opt, const Tensor& p) {
  std::vector<std::vector<double>> after;
  for (const std::vector<double>& g : kGrads) {
    p.set_grad(Tensor::from_vector(std::vector<float>(g.begin(), g.end()), p.shape()));
    opt.step();
    const std::vector<float> now = p.to_vector();
    after.emplace_back(now.begin(), now.end());
  }
  return after;
}

Tensor start() {
  Tensor p = Tensor::from_vector(std::vector<float>(kStart.begin(), kStart.end()), {4});
  p.set_requires_grad(true);
  return p;
}

void expect_near(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t t = 0; t < got.size(); ++t) {
    for (size_t k = 0; k < got[t].size(); ++k) {
      EXPECT_NEAR(got[t][k], want[t][k], 1e-6) << "step " << t + 1 << ", value " << k;
    }
  }
}

TEST(Adam, MatchesTheReferenceFormulaOverThreeSteps) {
  const Tensor p = start();
  optim::Adam adam(std::vector<Tensor>{p}, {0.01f, 0.9f, 0.999f, 1e-8f, 0.1f});
  EXPECT_EQ(adam.name(), "adam");
  expect_near(run(adam, p), reference_adam(0.01, 0.9, 0.999, 1e-8, 0.1, /*decoupled=*/false));
  EXPECT_EQ(adam.steps(), 3);
  EXPECT_EQ(adam.slots(), (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
}

TEST(AdamW, MatchesTheReferenceFormulaOverThreeSteps) {
  const Tensor p = start();
  optim::AdamW adamw(std::vector<Tensor>{p}, {0.01f, 0.8f, 0.99f, 1e-6f, 0.1f});
  EXPECT_EQ(adamw.name(), "adamw");
  expect_near(run(adamw, p), reference_adam(0.01, 0.8, 0.99, 1e-6, 0.1, /*decoupled=*/true));
}

TEST(AdamW, DecoupledDecayDiffersFromAdamsL2) {
  const Tensor a = start(), w = start();
  optim::Adam adam(std::vector<Tensor>{a}, {0.01f, 0.9f, 0.999f, 1e-8f, 0.1f});
  optim::AdamW adamw(std::vector<Tensor>{w}, {0.01f, 0.9f, 0.999f, 1e-8f, 0.1f});
  EXPECT_NE(run(adam, a), run(adamw, w));
}

TEST(SGD, NesterovMatchesTheReferenceFormula) {
  const Tensor p = start();
  optim::SGD sgd(std::vector<Tensor>{p}, {0.1f, 0.9f, 0.01f, /*nesterov=*/true});
  std::vector<double> q = kStart, v(q.size());
  std::vector<std::vector<double>> want;
  for (size_t t = 0; t < kGrads.size(); ++t) {
    for (size_t k = 0; k < q.size(); ++k) {
      const double d = kGrads[t][k] + 0.01 * q[k];
      v[k] = t == 0 ? d : 0.9 * v[k] + d;
      q[k] -= 0.1 * (d + 0.9 * v[k]);
    }
    want.push_back(q);
  }
  expect_near(run(sgd, p), want);
}

TEST(Optimizers, RefuseImpossibleSettingsByName) {
  const Tensor p = start();
  EXPECT_CONFIG_ERROR(optim::Adam(std::vector<Tensor>{p}, {.beta1 = 1.0f}), "beta1", "beta1 must be in [0, 1), got 1");
  EXPECT_CONFIG_ERROR(optim::Adam(std::vector<Tensor>{p}, {.eps = 0.0f}), "eps", "`eps` must be a finite number > 0");
  EXPECT_CONFIG_ERROR(optim::SGD(std::vector<Tensor>{p}, {.nesterov = true}), "nesterov",
                      "Nesterov momentum needs `momentum` > 0");
  EXPECT_CONFIG_ERROR(optim::make_optimizer("lamb", {{p}}, {}), "optimizer",
                      "unknown `optimizer` 'lamb'; choose sgd, adam or adamw");
  EXPECT_CONFIG_ERROR(optim::make_optimizer("adamw", {{p}}, {.momentum = 0.9f}), "momentum",
                      "`momentum` is SGD's; adamw keeps its own moments (`beta1`, `beta2`)");
}

TEST(Optimizers, LoadStateGivesEveryReplicaTheSameCopy) {
  const std::vector<std::vector<Tensor>> replicas = {{start()}, {start()}};
  optim::AdamW adamw(replicas);
  const Tensor m = Tensor::from_vector({1, 2, 3, 4}, {4}), v = Tensor::from_vector({5, 6, 7, 8}, {4});
  adamw.load_state({{m}, {v}}, 12);
  EXPECT_EQ(adamw.steps(), 12);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(adamw.state(0, r, 0).to_vector(), m.to_vector());
    EXPECT_EQ(adamw.state(1, r, 0).to_vector(), v.to_vector());
  }
  EXPECT_FALSE(adamw.state(0, 0, 0).same_as(adamw.state(0, 1, 0))) << "each replica owns its copy";
  EXPECT_THROW(adamw.load_state({{m}}, 1), std::invalid_argument);
  EXPECT_THROW(adamw.load_state({{Tensor::zeros({3})}, {v}}, 1), std::invalid_argument);
}

// A module that registers what it is told to, twice.
class Twice : public nn::Cloneable<Twice> {
 public:
  enum class What { name, tensor, child_name };
  explicit Twice(What what) {
    const Tensor w = Tensor::zeros({2});
    register_parameter("w", w);
    if (what == What::name) register_buffer("w", Tensor::zeros({2}));
    if (what == What::tensor) register_parameter("w2", w);
    if (what == What::child_name) register_module("w", std::make_unique<nn::ReLU>());
  }
  Tensor forward(const Tensor& x) override { return x; }
};

TEST(ModuleApi, RefusesANameOrTensorRegisteredTwice) {
  EXPECT_THAT(error_of<std::invalid_argument>([] { Twice m(Twice::What::name); }),
              testing::StrEq("cannot register 'w': the name 'w' is taken; give each parameter, buffer and child its "
                             "own name and tensor"));
  EXPECT_THAT(error_of<std::invalid_argument>([] { Twice m(Twice::What::tensor); }),
              testing::StrEq("cannot register 'w2': this tensor is registered already, as 'w'; give each parameter, "
                             "buffer and child its own name and tensor"));
  EXPECT_THAT(error_of<std::invalid_argument>([] { Twice m(Twice::What::child_name); }),
              testing::HasSubstr("cannot register 'w': the name 'w' is taken"));
}

TEST(ModuleApi, TrainRefusesAnOptimizerOfAnotherModel) {
  const ImageShape shape{1, 14, 14};
  parallel::DataParallel net(nn::lenet_module(shape, 2), parallel::cpu_devices(1));
  parallel::DataParallel other(nn::lenet_module(shape, 2), parallel::cpu_devices(1));
  optim::SGD sgd(other.replica_parameters(), {});
  data::InMemoryDataset data;
  data.rows = data.cols = 14;
  data.pixels.assign(4 * 14 * 14, 0);
  data.labels = {0, 1, 0, 1};
  EXPECT_THAT(error_of<std::invalid_argument>([&] { train::train(net, sgd, data, data, {}); }),
              testing::StrEq("the optimizer steps other parameters than the model's; build it from this "
                             "DataParallel's replica_parameters()"));
}

}  // namespace
}  // namespace dpt
