// Gradient communication overlapped with backward, over MPI: step time of DataParallel
// training with one allreduce after backward (--bucket-mb 0) against gradients allreduced
// in buckets while backward runs, on the ranks mpirun started (one device per process),
// and the wire volume per step against the ring's 2 (N-1)/N x gradient bytes per rank.
// The two variants alternate step by step (each going first every other time), so a busy
// machine slows both alike.
//
//   mpirun -np 2 build/bench/mpi_overlap [--model lenet|resnet18] [--batch 256] [--steps 20] [--bucket-mb 0.25]
// (bench/mpi_overlap.sh passes the options a container needs.)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dpt/data/idx_dataset.h"
#include "dpt/core/random.h"
#include "dpt/data/loader.h"
#include "dpt/nn/init.h"
#include "dpt/nn/models.h"
#include "dpt/optim/optimizer.h"
#include "dpt/parallel/data_parallel.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/mpi_communicator.h"

using namespace dpt;

namespace {

struct Variant {
  std::string name;
  double bucket_mb = 0;
  std::unique_ptr<parallel::DataParallel> net;
  std::unique_ptr<optim::SGD> sgd;
  std::vector<double> step_seconds;
  size_t bytes = 0;  // received by this rank during the timed steps
};

std::unique_ptr<nn::Module> make_model(const std::string& model) {
  std::unique_ptr<nn::Module> net = model == "lenet" ? std::unique_ptr<nn::Module>(nn::lenet_module(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses))
                                                     : std::unique_ptr<nn::Module>(nn::resnet18(dpt::data::kFashionMnistShape, dpt::data::kFashionMnistClasses));
  nn::init_weights(*net, nn::Init::kaiming, 1);
  return net;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Bytes a rank receives in a ring allreduce of `count` floats: every chunk but its own and
// the one it completes (the chunks as the ring cuts them).
size_t ring_bytes(size_t count, int n, int rank) {
  if (n == 1) return 0;
  const auto chunk = [&](int c) { return count / n + (static_cast<size_t>(c) < count % n ? 1 : 0); };
  return (2 * count - chunk(rank) - chunk((rank + 1) % n)) * sizeof(float);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Step time with gradient allreduce overlapped with backward vs after it, over MPI"};
  std::string model = "lenet";
  int64_t batch = 256;
  int steps = 20, warmup = 3;
  double bucket_mb = 0.25, timeout = 300;
  app.add_option("--model", model)->check(CLI::IsMember({"lenet", "resnet18"}))->capture_default_str();
  app.add_option("--batch", batch, "Global batch, split over the ranks")->capture_default_str();
  app.add_option("--steps", steps, "Timed steps per variant")->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed steps per variant first")->capture_default_str();
  app.add_option("--bucket-mb", bucket_mb, "Bucket size of the overlapped variant")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  parallel::MpiRuntime mpi;
  const int n = mpi.size(), rank = mpi.rank();
  auto comm = mpi.communicator("ring", timeout);
  const parallel::ProcessGroup group{comm, rank};

  // This rank's shard of one synthetic global batch (the images do not change the timing).
  const data::RowRange rows = data::shard_rows(batch, n, rank);
  Rng rng(100 + static_cast<uint64_t>(rank));
  data::Batch shard{Tensor::empty({rows.size(), 1, 28, 28}), Tensor::empty({rows.size()}, DType::i64), batch};
  fill_uniform(shard.images, 0.0f, 1.0f, rng);
  for (int64_t i = 0; i < rows.size(); ++i) shard.labels.data<int64_t>()[i] = static_cast<int64_t>(rng() % 10);

  std::vector<Variant> variants(2);
  variants[0].name = "one allreduce after backward (--bucket-mb 0)";
  variants[1].name = "buckets overlapped with backward (--bucket-mb " + std::to_string(bucket_mb).substr(0, 4) + ")";
  variants[1].bucket_mb = bucket_mb;
  for (Variant& v : variants) {
    parallel::DataParallelOptions options;
    options.cores = parallel::available_cores();
    options.bucket_mb = v.bucket_mb;
    options.process_group = group;
    v.net = std::make_unique<parallel::DataParallel>(make_model(model), parallel::cpu_devices(1), options);
    v.sgd = std::make_unique<optim::SGD>(v.net->replica_parameters(), optim::SgdOptions{0.01f, 0.9f, 0.0f});
  }
  size_t gradient_floats = 0;
  for (const Tensor& p : variants[0].net->module().parameters()) gradient_floats += static_cast<size_t>(p.numel());
  size_t buffer_floats = 0;
  for (const Tensor& b : variants[0].net->module().buffers()) buffer_floats += static_cast<size_t>(b.numel());

  const auto step = [&](Variant& v) {
    v.sgd->zero_grad();
    v.net->forward_backward(shard);
    v.sgd->step();
  };
  for (int i = 0; i < warmup; ++i) {
    for (Variant& v : variants) step(v);
  }
  for (int i = 0; i < steps; ++i) {
    // Which variant goes first alternates: the second of a pair runs on warmer caches.
    for (int k = 0; k < 2; ++k) {
      Variant& v = variants[(i + k) % 2];
      comm->barrier(rank);  // every rank starts the step together
      const size_t before = comm->bytes_received(rank);
      const auto start = std::chrono::steady_clock::now();
      step(v);
      v.step_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      v.bytes += comm->bytes_received(rank) - before;
    }
  }

  // The communication overlap can hide at most: one allreduce of all gradients, alone.
  std::vector<float> gradients(gradient_floats, 1.0f);
  comm->allreduce_sum(rank, gradients.data(), gradients.size());
  std::vector<double> allreduce_seconds;
  for (int i = 0; i < 5; ++i) {
    comm->barrier(rank);
    const auto start = std::chrono::steady_clock::now();
    comm->allreduce_sum(rank, gradients.data(), gradients.size());
    allreduce_seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }

  if (rank == 0) {
    std::printf(
        "mpi_overlap: %d ranks on %s, %s, global batch %lld (%lld on rank 0), %d cores per rank, %d timed steps\n", n,
        mpi.host().c_str(), model.c_str(), static_cast<long long>(batch), static_cast<long long>(rows.size()),
        parallel::available_cores(), steps);
    const double base = median(variants[0].step_seconds);
    for (const Variant& v : variants) {
      const parallel::GradientBucketer* bucketer = v.net->bucketer(0);
      std::printf("  %-52s median step %8.2f ms", v.name.c_str(), 1e3 * median(v.step_seconds));
      if (bucketer) {
        std::printf("  (%zu buckets, %zu started during backward)", bucketer->num_buckets(),
                    bucketer->launched_during_backward());
      }
      std::printf("\n");
    }
    std::printf("ratio (overlapped / after backward): %.3fx\n", median(variants[1].step_seconds) / base);
    std::printf("one allreduce of all %zu gradient floats alone: median %.2f ms (the most overlap can hide)\n",
                gradient_floats, 1e3 * median(allreduce_seconds));

    // Wire volume: the gradients (one collective, or one per bucket), plus the step's loss,
    // accuracy and example count (3 floats) and any BatchNorm buffers.
    const size_t gradient_bytes = gradient_floats * sizeof(float);
    const double ideal = 2.0 * (n - 1) / n * static_cast<double>(gradient_bytes);
    for (const Variant& v : variants) {
      size_t exact = ring_bytes(3, n, rank) + (buffer_floats ? ring_bytes(buffer_floats, n, rank) : 0);
      const parallel::GradientBucketer* bucketer = v.net->bucketer(0);
      if (!bucketer) {
        exact += ring_bytes(gradient_floats, n, rank);
      } else {
        const std::vector<Tensor> params = v.net->module().parameters();
        for (const auto& bucket : bucketer->buckets()) {
          size_t count = 0;
          for (size_t i : bucket) count += static_cast<size_t>(params[i].numel());
          exact += ring_bytes(count, n, rank);
        }
      }
      const double measured = static_cast<double>(v.bytes) / steps;
      std::printf(
          "wire volume per step on rank 0, %s: measured %.0f bytes; ring 2(N-1)/N x %zu gradient bytes = %.0f "
          "(measured / that: %.4f); exact for this ring's chunks and the step's small collectives: %zu\n",
          bucketer ? "bucketed" : "one allreduce", measured, gradient_bytes, ideal, measured / ideal, exact);
    }
  }
  // The DataParallels (and their communication threads) go before MPI is finalised.
  variants.clear();
  comm.reset();
  return 0;
}
