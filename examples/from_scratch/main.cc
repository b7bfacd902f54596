// The multi-GPU lesson's from-scratch data parallelism, on N CPU devices, with each of its
// four steps one visible line: replicate the parameters, split the minibatch, allreduce
// the gradients, and let every device make the same SGD update.
//   usage: from_scratch [DATA_DIR] [DEVICES] [STEPS]   (default: Fashion-MNIST, 2, one epoch)
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <dpt/dpt.h>

using namespace dpt;

int main(int argc, char** argv) {
  data::DataOptions options;
  if (argc > 1) options.data_dir = argv[1];
  const std::vector<Device> devices = parallel::cpu_devices(argc > 2 ? std::atoi(argv[2]) : 2);
  const int64_t max_steps = argc > 3 ? std::atoll(argv[3]) : -1;
  const data::LoadedData data = data::load_data(options);
  const int64_t batch_size = 256;
  const float lr = 0.2f;

  const std::vector<Tensor> params = nn::lenet_params(/*seed=*/0, data.train->shape(), data.train->num_classes());
  std::vector<std::vector<Tensor>> replicas;
  for (const Device& d : devices) replicas.push_back(parallel::replicate(params, d));  // 1. replicate

  data::BatchLoader loader(*data.train, batch_size, /*shuffle=*/true, /*seed=*/0);
  data::Batch batch;
  double loss_sum = 0;
  int64_t seen = 0, step = 0;
  while (step != max_steps && loader.next(batch)) {
    ++step;
    const auto shards = parallel::split_batch(batch.images, batch.labels, devices);  // 2. split the minibatch
    for (size_t d = 0; d < devices.size(); ++d) {
      const Tensor loss = parallel::shard_loss_sum(nn::lenet(shards[d].X, replicas[d]), shards[d]);
      autograd::backward(loss);
      loss_sum += loss.item();
    }
    for (size_t p = 0; p < params.size(); ++p) {
      std::vector<Tensor> grads;
      for (const std::vector<Tensor>& replica : replicas) grads.push_back(replica[p].grad());
      parallel::allreduce(grads);  // 3. allreduce: every device now holds the summed gradient
    }
    for (const std::vector<Tensor>& replica : replicas) optim::sgd(replica, lr, batch.labels.dim(0));  // 4. update
    seen += batch.labels.dim(0);
    if (step % 50 == 0) std::printf("step %lld: mean loss %.3f\n", static_cast<long long>(step), loss_sum / seen);
  }
  std::printf("%lld steps on %zu devices: mean training loss %.3f\n", static_cast<long long>(step), devices.size(),
              loss_sum / static_cast<double>(seen));
  return 0;
}
