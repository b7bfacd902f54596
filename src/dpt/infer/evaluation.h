// How well a trained model classifies a labelled data set: accuracy, per-class accuracy
// and the confusion matrix, evaluated through the replica engine's split evaluation
// (parallel::DataParallel::confusion_matrix: every test batch split over the devices, as
// training evaluates). report/evaluation_report.h prints and draws it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dpt/core/device.h"
#include "dpt/data/source.h"
#include "dpt/nn/module.h"

namespace dpt::infer {

struct Evaluation {
  int64_t classes = 0;
  std::vector<int64_t> confusion;  // row-major [classes x classes]: (true label, predicted class)

  int64_t count(int64_t truth, int64_t predicted) const { return confusion[truth * classes + predicted]; }
  int64_t examples() const;
  int64_t examples_of(int64_t truth) const;  // the row sum
  int64_t correct() const;                   // the diagonal
  double accuracy() const;
  double class_accuracy(int64_t truth) const;  // recall of the class; 0 for a class with no examples
};

// The test split of `options`' data, read as a model trained on `trained` reads it: at the
// recorded size and channels (unless `options` names others), normalized with the recorded
// statistics. Throws DataError when the data's classes or shape are not the recorded ones.
std::shared_ptr<const data::Dataset> test_data_for(const data::DataInfo& trained, data::DataOptions options);

// Evaluates `net` (in eval mode) on `data` in batches of `batch_size` split over `devices`
// (one replica each, sharing `cores`). Throws ConfigError for bad devices or batch size.
Evaluation evaluate(std::unique_ptr<nn::Module> net, const std::vector<Device>& devices, const data::Dataset& data,
                    int64_t batch_size, int cores);

}  // namespace dpt::infer
