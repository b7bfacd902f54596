// A network of your own, trained on an image folder (FOLDER/train/CLASS/PICTURE,
// FOLDER/test/...) on two CPU devices with AdamW and a label-smoothed cross-entropy: each
// device holds a replica, takes half of every batch, and the gradients are summed before
// every replica makes the same update. Dropout's masks follow the examples, not the
// devices, so one device would draw the same ones.
//   usage: custom_cnn FOLDER [EPOCHS] [EXAMPLES]   (EXAMPLES: the first N of each split; 0: all)
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <dpt/dpt.h>

using namespace dpt;

// conv-bn-relu twice, pooled to 2x2 whatever the pictures' size, then a classifier with a
// GELU and Dropout; every layer a registered child, so replicas and checkpoints see all
// parameters and buffers.
class SmallCnn : public nn::Cloneable<SmallCnn> {
 public:
  SmallCnn(const ImageShape& in, int64_t classes) {
    auto features = std::make_unique<nn::Sequential>();
    features->add("conv1", std::make_unique<nn::Conv2d>(in.channels, 16, 3, 1, 1));
    features->add("bn1", std::make_unique<nn::BatchNorm2d>(16));
    features->add("relu1", std::make_unique<nn::ReLU>());
    features->add("pool1", std::make_unique<nn::MaxPool2d>(2, 2));
    features->add("conv2", std::make_unique<nn::Conv2d>(16, 32, 3, 1, 1));
    features->add("bn2", std::make_unique<nn::BatchNorm2d>(32));
    features->add("relu2", std::make_unique<nn::ReLU>());
    features->add("pool2", std::make_unique<nn::AdaptiveAvgPool2d>(2));
    features->add("flatten", std::make_unique<nn::Flatten>());
    register_module("features", std::move(features));
    auto classifier = std::make_unique<nn::Sequential>();
    classifier->add("fc1", std::make_unique<nn::Linear>(32 * 2 * 2, 64));
    classifier->add("gelu", std::make_unique<nn::GELU>());
    classifier->add("dropout", std::make_unique<nn::Dropout>(0.25f, /*seed=*/1));
    classifier->add("fc2", std::make_unique<nn::Linear>(64, classes));
    register_module("classifier", std::move(classifier));
  }
  Tensor forward(const Tensor& x) override { return child(1)(child(0)(x)); }
};

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: custom_cnn FOLDER [EPOCHS] [EXAMPLES]\n");
    return 2;
  }
  data::DataOptions options;
  options.data_dir = argv[1];
  options.hflip = true;
  options.normalize = true;
  options.train_limit = options.test_limit = argc > 3 ? std::atoll(argv[3]) : 0;
  const data::LoadedData data = data::load_data(options);

  auto net = std::make_unique<SmallCnn>(data.train->shape(), data.train->num_classes());
  nn::init_weights(*net, nn::Init::kaiming, /*seed=*/0);
  parallel::DataParallelOptions parallel_options;
  parallel_options.loss = std::make_shared<nn::CrossEntropyLoss>(/*label_smoothing=*/0.1f);
  parallel::DataParallel model(std::move(net), parallel::cpu_devices(2), parallel_options);
  optim::AdamW adamw(model.replica_parameters(), {.lr = 2e-3f, .weight_decay = 0.01f});

  train::TrainOptions training;
  training.epochs = argc > 2 ? std::atoi(argv[2]) : 5;
  training.batch_size = 128;
  train::train(model, adamw, *data.train, *data.test, training, [](const train::EpochStats& e) {
    std::printf("epoch %d: loss %.3f, train acc %.3f, test acc %.3f, %.1f s\n", e.epoch, e.train_loss, e.train_acc,
                e.test_acc, e.seconds);
  });
  return 0;
}
