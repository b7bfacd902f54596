// One process per device under mpirun: every rank builds the same LeNet, reads its own
// shard of every global batch, and the ranks' gradients are summed over MPI before each
// update, so every rank ends with the same parameters (each prints its digest to show it).
//   usage: mpirun -np 2 mpi_lenet [DATA_DIR] [EPOCHS] [EXAMPLES]
#include <cstdio>
#include <cstdint>
#include <cstdlib>

#include <dpt/dpt.h>

using namespace dpt;

int main(int argc, char** argv) {
  parallel::MpiRuntime mpi;  // MPI_Init here, MPI_Finalize when main returns
  data::DataOptions options;
  if (argc > 1) options.data_dir = argv[1];
  options.train_limit = options.test_limit = argc > 3 ? std::atoll(argv[3]) : 0;
  const data::LoadedData data = data::load_data(options);

  parallel::DataParallelOptions parallel_options;
  parallel_options.process_group = {mpi.communicator("ring", /*timeout_seconds=*/300), mpi.rank()};
  parallel::DataParallel model(nn::lenet_module(data.train->shape(), data.train->num_classes()),
                               parallel::cpu_devices(1), parallel_options);
  optim::SGD sgd(model.replica_parameters(), {.lr = 0.2f});

  train::TrainOptions training;
  training.epochs = argc > 2 ? std::atoi(argv[2]) : 3;
  const int rank = mpi.rank();
  train::train(model, sgd, *data.train, *data.test, training, [&](const train::EpochStats& e) {
    std::printf("rank %d of %d, epoch %d: loss %.3f, test acc %.3f\n", rank, mpi.size(), e.epoch, e.train_loss,
                e.test_acc);
  });
  // The loop already stops if a rank's replica differs after an epoch; this shows it.
  uint64_t digest = 1469598103934665603ull;  // FNV-1a over the parameters' bytes
  for (const Tensor& p : model.module().parameters()) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(p.data<float>());
    for (int64_t i = 0; i < p.numel() * 4; ++i) digest = (digest ^ bytes[i]) * 1099511628211ull;
  }
  std::printf("rank %d: parameter digest %016llx\n", rank, static_cast<unsigned long long>(digest));
  return 0;
}
