// ZeRO stage 1 (src/dpt/parallel/zero_optimizer): the optimizer state sharded over the
// replicas. In deterministic mode a sharded run ends with the bits of the unsharded run on
// one device (parameters and the gathered state), for SGD with momentum and for Adam, on
// 1, 2 and 3 replicas; each replica keeps 1/N of the state; the gathered state resumes on
// another number of replicas to the same bits; and without deterministic mode the
// reduce-scattered gradients give the unsharded parameters up to rounding. (Several
// processes: tests/mpi, dptrain --zero 1.)
//
// Runs under ThreadSanitizer too (the label `parallel`): one core per device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dpt/nn/init.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/zero_optimizer.h"
#include "test_support.h"

using dpt::Tensor;
using dpt::parallel::DataParallel;
namespace optim = dpt::optim;

namespace {
using dpt::testing_support::random_images;
using dpt::testing_support::small_bn_net;

struct Training {
  std::unique_ptr<DataParallel> net;
  std::unique_ptr<optim::Optimizer> optimizer;
};

// small_bn_net (a convolution, BatchNorm, a linear layer) on `devices` CPU devices, one
// core each; deterministic chunks of 4 unless `chunk` is 0.
Training make_run(int devices, int zero, const std::string& optimizer, int64_t chunk = 4) {
  auto module = small_bn_net();
  dpt::nn::init_weights(*module, dpt::nn::Init::kaiming, 5);
  dpt::parallel::DataParallelOptions options;
  options.cores = devices;
  options.deterministic_chunk = chunk;
  options.zero = zero;
  Training run;
  run.net = std::make_unique<DataParallel>(std::move(module), dpt::parallel::cpu_devices(devices), options);
  optim::OptimizerSettings settings;
  settings.lr = optimizer == "sgd" ? 0.05f : 0.01f;
  settings.momentum = optimizer == "sgd" ? 0.9f : 0.0f;
  settings.weight_decay = 1e-3f;
  run.optimizer = dpt::parallel::make_replica_optimizer(run.net->group(), optimizer, settings);
  return run;
}

void train_steps(Training& run, int first, int steps) {
  for (int s = first; s < first + steps; ++s) {
    const auto [X, y] = random_images(12, 100 + s, 8);
    run.net->forward_backward(X, y);
    run.optimizer->step();
  }
}

std::vector<std::vector<float>> values(const std::vector<Tensor>& tensors) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : tensors) out.push_back(t.to_vector());
  return out;
}

// The optimizer's whole state, slot by slot (gathered first where sharded).
std::vector<std::vector<Tensor>> whole_state(optim::Optimizer& optimizer, size_t params) {
  optimizer.gather_state();
  std::vector<std::vector<Tensor>> state(optimizer.slots().size());
  for (size_t s = 0; s < state.size(); ++s) {
    for (size_t i = 0; i < params; ++i) state[s].push_back(optimizer.state(s, 0, i));
  }
  return state;
}

void expect_same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
                      const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << what << " " << i;
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)), 0) << what << " " << i;
  }
}

void expect_same_state(const std::vector<std::vector<Tensor>>& a, const std::vector<std::vector<Tensor>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 0; s < a.size(); ++s) expect_same_bits(values(a[s]), values(b[s]), "state slot " + std::to_string(s));
}

class ZeroOptimizerBits : public ::testing::TestWithParam<std::string> {};

TEST_P(ZeroOptimizerBits, ShardedOnAnyReplicasEndsWithTheUnshardedBitsOfOneDevice) {
  Training reference = make_run(1, 0, GetParam());
  train_steps(reference, 0, 3);
  const auto params = reference.net->replica_parameters()[0];
  const auto reference_state = whole_state(*reference.optimizer, params.size());
  for (const int devices : {1, 2, 3}) {
    SCOPED_TRACE(std::to_string(devices) + " replicas");
    Training sharded = make_run(devices, 1, GetParam());
    train_steps(sharded, 0, 3);
    for (size_t r = 0; r < static_cast<size_t>(devices); ++r) {
      expect_same_bits(values(sharded.net->replica_parameters()[r]), values(params), "replica " + std::to_string(r));
    }
    expect_same_state(whole_state(*sharded.optimizer, params.size()), reference_state);
    // Each replica keeps 1/N of what every replica of an unsharded run keeps.
    Training unsharded = make_run(devices, 0, GetParam());
    train_steps(unsharded, 0, 1);
    const auto& zero = dynamic_cast<const dpt::parallel::ZeroOptimizer&>(*sharded.optimizer);
    EXPECT_EQ(zero.state_bytes() * static_cast<size_t>(devices), unsharded.optimizer->state_bytes());
    EXPECT_EQ(zero.unsharded_state_bytes(), unsharded.optimizer->state_bytes());
  }
}

TEST_P(ZeroOptimizerBits, TheGatheredStateResumesOnAnotherNumberOfReplicas) {
  Training reference = make_run(1, 0, GetParam());
  train_steps(reference, 0, 4);
  Training first = make_run(2, 1, GetParam());
  train_steps(first, 0, 2);
  const auto params = first.net->replica_parameters()[0];
  const auto state = whole_state(*first.optimizer, params.size());
  Training resumed = make_run(3, 1, GetParam());
  for (const auto& replica : resumed.net->replica_parameters()) {
    for (size_t i = 0; i < replica.size(); ++i) replica[i].copy_from(params[i]);
  }
  for (size_t r = 0; r < 3; ++r) {
    const auto& from = first.net->group().replica(0).buffers;
    const auto& into = resumed.net->group().replica(r).buffers;
    for (size_t i = 0; i < from.size(); ++i) into[i].copy_from(from[i]);
  }
  resumed.optimizer->load_state(state, first.optimizer->steps());
  train_steps(resumed, 2, 2);
  expect_same_bits(values(resumed.net->replica_parameters()[2]), values(reference.net->replica_parameters()[0]),
                   "parameter");
  expect_same_state(whole_state(*resumed.optimizer, params.size()),
                    whole_state(*reference.optimizer, params.size()));
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ZeroOptimizerBits, ::testing::Values("sgd", "adam"));

TEST(ZeroOptimizer, ReduceScatteredGradientsGiveTheAllreducedParametersUpToRounding) {
  Training sharded = make_run(3, 1, "sgd", /*chunk=*/0);
  Training unsharded = make_run(3, 0, "sgd", /*chunk=*/0);
  train_steps(sharded, 0, 3);
  train_steps(unsharded, 0, 3);
  const auto a = values(sharded.net->replica_parameters()[1]), b = values(unsharded.net->replica_parameters()[1]);
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t k = 0; k < a[i].size(); ++k) ASSERT_NEAR(a[i][k], b[i][k], 1e-5f * (std::fabs(b[i][k]) + 1e-2f));
  }
  // The replicas hold the same bits: the all-gather gives every replica every slice.
  expect_same_bits(values(sharded.net->replica_parameters()[0]), values(sharded.net->replica_parameters()[2]),
                   "replicas 0 and 2");
}

TEST(ZeroOptimizer, RefusesBucketsAndAGroupThatAllreduces) {
  dpt::parallel::ReplicaGroupOptions options;
  options.zero = 1;
  options.bucket_mb = 1;
  EXPECT_THROW(dpt::parallel::check_replica_modes(options), dpt::ConfigError);
  options.bucket_mb = 0;
  options.zero = 2;
  EXPECT_THROW(dpt::parallel::check_replica_modes(options), dpt::ConfigError);
  Training plain = make_run(2, 0, "sgd");
  EXPECT_THROW(dpt::parallel::ZeroOptimizer(plain.net->group(), "sgd", {}), std::invalid_argument);
}

}  // namespace
