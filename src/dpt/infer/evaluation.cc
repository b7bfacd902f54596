#include "dpt/infer/evaluation.h"

#include "dpt/data/data_error.h"
#include "dpt/data/transforms.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "dpt/core/config_error.h"
#include "dpt/parallel/data_parallel.h"

namespace dpt::infer {

int64_t Evaluation::examples() const {
  int64_t n = 0;
  for (int64_t c : confusion) n += c;
  return n;
}

int64_t Evaluation::examples_of(int64_t truth) const {
  int64_t n = 0;
  for (int64_t p = 0; p < classes; ++p) n += count(truth, p);
  return n;
}

int64_t Evaluation::correct() const {
  int64_t n = 0;
  for (int64_t c = 0; c < classes; ++c) n += count(c, c);
  return n;
}

double Evaluation::accuracy() const {
  const int64_t n = examples();
  return n == 0 ? 0.0 : static_cast<double>(correct()) / static_cast<double>(n);
}

double Evaluation::class_accuracy(int64_t truth) const {
  const int64_t n = examples_of(truth);
  return n == 0 ? 0.0 : static_cast<double>(count(truth, truth)) / static_cast<double>(n);
}

std::shared_ptr<const data::Dataset> test_data_for(const data::DataInfo& trained, data::DataOptions options) {
  if (options.image_size == 0 && trained.shape.height == trained.shape.width) options.image_size = trained.shape.height;
  if (options.channels == 0) options.channels = trained.shape.channels;
  options.normalize = options.hflip = false;
  options.random_crop = 0;
  std::shared_ptr<const data::Dataset> test = data::load_data(options).test;
  const data::DataInfo info = test->info();
  if (info.shape != trained.shape || info.classes != trained.classes) {
    const std::string classes = data::class_difference(trained.classes, "the model", info.classes, "the test split");
    throw data::DataError("the model was trained on " + trained.shape.str() + " images in " +
                          std::to_string(trained.classes.size()) + " classes, the test split of '" + options.data_dir +
                          "' holds " + info.shape.str() + " images in " + std::to_string(info.classes.size()) +
                          " classes" + (classes.empty() ? "" : " (" + classes + ")") +
                          "; pass the `data_dir` it was trained on");
  }
  if (!trained.mean.empty()) test = data::transformed(test, {data::normalize(trained.mean, trained.stddev)});
  return test;
}

Evaluation evaluate(std::unique_ptr<nn::Module> net, const std::vector<Device>& devices, const data::Dataset& data,
                    int64_t batch_size, int cores) {
  if (batch_size < 1) throw ConfigError("batch_size", "`batch_size` must be positive, got " + std::to_string(batch_size));
  if (data.size() == 0) throw std::invalid_argument("there is nothing to evaluate: the data set is empty");
  net->eval();
  parallel::DataParallel parallel_net(std::move(net), devices, parallel::DataParallelOptions{"ring", cores, 0.0, {}});
  parallel_net.eval();
  const int64_t classes = data.num_classes();
  return {classes, parallel_net.confusion_matrix(data, batch_size, classes)};
}

}  // namespace dpt::infer
