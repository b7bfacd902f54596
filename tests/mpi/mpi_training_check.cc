// Training over MPI, run by mpirun with 2 and 3 ranks on loopback (see CMakeLists.txt):
// N processes, each with one device, its shard of every global batch (a sharded
// BatchLoader) and an MPI communicator, end an epoch of LeNet training with exactly the
// parameters (bit for bit) that one process on N devices ends with, with and without
// gradient buckets overlapped with backward; they report the same loss and accuracy, and
// split evaluation across the processes to the same count. The data set is cut so that the
// last batch has fewer examples than ranks: a process with an empty shard still takes part.
// Two devices per process (the two-level allreduce, with and without bf16 compression) end
// close to one process on all the job's devices.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../mpi/mpi_test_main.h"
#include "dpt/data/idx_dataset.h"
#include "dpt/core/random.h"
#include "dpt/data/idx_dataset.h"
#include "dpt/data/loader.h"
#include "dpt/nn/init.h"
#include "dpt/nn/models.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/mpi_communicator.h"

using dpt::testing_support::g_mpi;
namespace nn = dpt::nn;

namespace {

dpt::data::InMemoryDataset random_dataset(int64_t n, uint64_t seed) {
  dpt::Rng rng(seed);
  dpt::data::InMemoryDataset data;
  for (int64_t i = 0; i < n * 28 * 28; ++i) data.pixels.push_back(static_cast<uint8_t>(rng() % 256));
  for (int64_t i = 0; i < n; ++i) data.labels.push_back(static_cast<int64_t>(rng() % 10));
  return data;
}

struct Outcome {
  std::vector<std::vector<float>> params;
  std::vector<dpt::parallel::StepResult> steps;
  int64_t test_correct = 0;
};

// One epoch of LeNet + SGD with momentum on `devices` CPU devices. `group` distributed:
// this process is one rank, reads its shard, and its gradients travel between the
// processes as `compression` says; `network_bytes`, when given, gets what this rank read
// from the other processes during the epoch. Every local replica ends with the first's
// parameters (checked here).
Outcome train_epoch(const dpt::data::InMemoryDataset& train, const dpt::data::InMemoryDataset& test, int devices,
                    dpt::parallel::ProcessGroup group, double bucket_mb,
                    dpt::parallel::Compression compression = dpt::parallel::Compression::none,
                    size_t* network_bytes = nullptr) {
  auto net = nn::lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses);
  nn::init_weights(*net, nn::Init::kaiming, 21);
  dpt::parallel::DataParallelOptions options;
  options.cores = devices;  // one core (one oneDNN thread) per device, here and in every process
  options.bucket_mb = bucket_mb;
  options.process_group = group;
  options.compression = compression;
  dpt::parallel::DataParallel dp(std::move(net), dpt::parallel::cpu_devices(devices), options);
  dpt::optim::SGD sgd(dp.replica_parameters(), {0.05f, 0.9f, 1e-4f});
  const size_t before = group.distributed() ? group.comm->bytes_received(group.rank) : 0;  // after rank 0's parameters came
  dpt::data::BatchLoader loader(train, 32, /*shuffle=*/true, 3);
  if (group.distributed()) loader.set_shard(group.rank, group.size());
  loader.start_epoch(0);
  Outcome outcome;
  dpt::data::Batch batch;
  while (loader.next(batch)) {
    sgd.zero_grad();
    outcome.steps.push_back(dp.forward_backward(batch));
    sgd.step();
  }
  dp.eval();
  outcome.test_correct = dp.count_correct(test, 16);
  for (const dpt::Tensor& p : dp.module().parameters()) outcome.params.push_back(p.to_vector());
  for (int d = 1; d < devices; ++d) {
    const std::vector<dpt::Tensor>& replica = dp.group().replica(static_cast<size_t>(d)).params;
    for (size_t i = 0; i < replica.size(); ++i) EXPECT_EQ(replica[i].to_vector(), outcome.params[i]) << "device " << d;
  }
  if (network_bytes != nullptr) *network_bytes = group.comm->bytes_received(group.rank) - before;
  return outcome;
}

// 64-bit FNV-1a over the parameters' bits and the figures every rank reports.
uint64_t digest_of(const Outcome& o) {
  uint64_t h = 14695981039346656037ull;
  const auto mix = [&h](const void* data, size_t bytes) {
    for (size_t i = 0; i < bytes; ++i) h = (h ^ static_cast<const unsigned char*>(data)[i]) * 1099511628211ull;
  };
  for (const std::vector<float>& p : o.params) mix(p.data(), p.size() * sizeof(float));
  for (const dpt::parallel::StepResult& s : o.steps) {
    mix(&s.examples, sizeof s.examples);
    mix(&s.correct, sizeof s.correct);
  }
  mix(&o.test_correct, sizeof o.test_correct);
  return h;
}

// Every rank's digest of its outcome, on every rank: each rank holds rank 0's parameters,
// not only rank 0 (which alone is compared with the one-process run below).
void expect_every_rank_equals_rank_0(dpt::parallel::Communicator& comm, const Outcome& outcome) {
  const int n = g_mpi->size(), rank = g_mpi->rank();
  std::vector<int64_t> digests(static_cast<size_t>(n), 0);
  digests[static_cast<size_t>(rank)] = static_cast<int64_t>(digest_of(outcome));
  comm.allreduce(rank, digests.data(), digests.size(), dpt::parallel::ReduceOp::sum);
  for (int r = 1; r < n; ++r) {
    EXPECT_EQ(digests[static_cast<size_t>(r)], digests[0])
        << "rank " << r << " ended with other parameters or figures than rank 0 (seen on rank " << rank << ")";
  }
}

void compare_with_one_process(const dpt::data::InMemoryDataset& train, const dpt::data::InMemoryDataset& test, int n, double bucket_mb,
                              const Outcome& distributed);

class MpiTraining : public ::testing::TestWithParam<double> {};

TEST_P(MpiTraining, NProcessesEndWithTheParametersOfOneProcessOnNDevices) {
  const int n = g_mpi->size(), rank = g_mpi->rank();
  const double bucket_mb = GetParam();
  // 66 examples in batches of 32: 32, 32, 2 (with 3 ranks the last rank's shard is empty).
  const dpt::data::InMemoryDataset train = random_dataset(66, 1), test = random_dataset(37, 2);
  auto comm = g_mpi->communicator("ring", 120);
  const Outcome distributed = train_epoch(train, test, 1, {comm, rank}, bucket_mb);
  ASSERT_EQ(distributed.steps.size(), 3u);
  EXPECT_EQ(distributed.steps[2].examples, 2);  // every process reports the global batch
  expect_every_rank_equals_rank_0(*comm, distributed);
  // Rank 0 alone compares with one process on n devices, in a function of its own so that
  // a failed ASSERT there returns from it, not from the test: the barrier below must run,
  // or the other ranks would wait in it until their timeout.
  if (rank == 0) compare_with_one_process(train, test, n, bucket_mb, distributed);
  comm->barrier(rank);
}

void compare_with_one_process(const dpt::data::InMemoryDataset& train, const dpt::data::InMemoryDataset& test, int n, double bucket_mb,
                              const Outcome& distributed) {
  {
    const Outcome local = train_epoch(train, test, n, {}, bucket_mb);
    ASSERT_EQ(local.params.size(), distributed.params.size());
    for (size_t i = 0; i < local.params.size(); ++i) {
      EXPECT_EQ(std::memcmp(local.params[i].data(), distributed.params[i].data(), local.params[i].size() * 4), 0)
          << "parameter " << i << " differs between " << n << " processes and " << n << " devices";
    }
    for (size_t s = 0; s < local.steps.size(); ++s) {
      EXPECT_EQ(distributed.steps[s].examples, local.steps[s].examples);
      EXPECT_EQ(distributed.steps[s].correct, local.steps[s].correct);
      // Summed in float over the processes, in double over the devices.
      EXPECT_NEAR(distributed.steps[s].loss_sum, local.steps[s].loss_sum, 1e-4 * local.steps[s].loss_sum);
    }
    EXPECT_EQ(distributed.test_correct, local.test_correct);

    if (bucket_mb > 0) {
      // Buckets change only where the ring cuts the buffer: with 2 ranks nothing, with 3
      // the association of three-term sums.
      const Outcome unbucketed = train_epoch(train, test, n, {}, 0.0);
      for (size_t i = 0; i < unbucketed.params.size(); ++i) {
        for (size_t k = 0; k < unbucketed.params[i].size(); ++k) {
          const float a = unbucketed.params[i][k], b = distributed.params[i][k];
          if (n == 2) {
            ASSERT_EQ(a, b) << "parameter " << i << " element " << k;
          } else {
            ASSERT_NEAR(a, b, 1e-5f * (std::fabs(a) + 1e-2f)) << "parameter " << i << " element " << k;
          }
        }
      }
    }
  }
}

// 0: one allreduce after backward; 0.05 MiB: LeNet's gradients in 4 buckets, overlapped.
INSTANTIATE_TEST_SUITE_P(Buckets, MpiTraining, ::testing::Values(0.0, 0.05));

// Two devices per process (the allreduce in two levels) against one process on all the
// job's devices: the sums group their terms otherwise, so the parameters agree closely,
// not bit for bit (--deterministic's CLI tests check the bits); the counts exactly. Every
// rank holds rank 0's parameters. With bf16 compression the processes exchange half the
// bytes, and the parameters stay close.
void expect_close_to_one_process(const Outcome& local, const Outcome& distributed, float tolerance) {
  ASSERT_EQ(local.params.size(), distributed.params.size());
  for (size_t i = 0; i < local.params.size(); ++i) {
    for (size_t k = 0; k < local.params[i].size(); ++k) {
      const float a = local.params[i][k], b = distributed.params[i][k];
      ASSERT_NEAR(a, b, tolerance * (std::fabs(a) + 1e-2f)) << "parameter " << i << " element " << k;
    }
  }
  ASSERT_EQ(local.steps.size(), distributed.steps.size());
  for (size_t s = 0; s < local.steps.size(); ++s) EXPECT_EQ(distributed.steps[s].examples, local.steps[s].examples);
}

TEST(MpiTwoDevicesPerProcess, EndCloseToOneProcessOnEveryDeviceOnEveryRankAndBf16HalvesTheNetworkBytes) {
  const int n = g_mpi->size(), rank = g_mpi->rank();
  const dpt::data::InMemoryDataset train = random_dataset(66, 1), test = random_dataset(37, 2);
  auto comm = g_mpi->communicator("ring", 120);
  size_t float_bytes = 0, bf16_bytes = 0;
  const Outcome floats =
      train_epoch(train, test, 2, {comm, rank}, 0.0, dpt::parallel::Compression::none, &float_bytes);
  const Outcome bf16 = train_epoch(train, test, 2, {comm, rank}, 0.0, dpt::parallel::Compression::bf16, &bf16_bytes);
  expect_every_rank_equals_rank_0(*comm, floats);
  expect_every_rank_equals_rank_0(*comm, bf16);
  // Gradients are most of what crosses: half their bytes, the control data unchanged.
  EXPECT_LT(static_cast<double>(bf16_bytes), 0.52 * static_cast<double>(float_bytes)) << "rank " << rank;
  EXPECT_GT(static_cast<double>(bf16_bytes), 0.48 * static_cast<double>(float_bytes)) << "rank " << rank;
  if (rank == 0) {
    const Outcome local = train_epoch(train, test, n * 2, {}, 0.0);
    expect_close_to_one_process(local, floats, 1e-4f);
    expect_close_to_one_process(local, bf16, 2e-2f);
    EXPECT_EQ(floats.test_correct, local.test_correct);
  }
  comm->barrier(rank);
}

}  // namespace

int main(int argc, char** argv) { return dpt::testing_support::run_mpi_tests(argc, argv); }
