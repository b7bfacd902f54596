// `dptrain evaluate`: a checkpoint's test accuracy, per class, and its confusion matrix.
#include <cstdio>
#include <exception>

#include "commands.h"
#include "dpt/core/config_error.h"
#include "dpt/cuda/runtime.h"
#include "dpt/infer/evaluation.h"
#include "dpt/report/evaluation_report.h"
#include "dpt/infer/model.h"
#include "dpt/parallel/device_list.h"
#include "dpt/parallel/device_pool.h"

namespace dpt::cli {

int reporting_errors(const Wording& wording, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dptrain: error: %s\n", (wording ? wording(e.what()) : std::string(e.what())).c_str());
    return 1;
  }
}

int run_evaluate(const EvaluateSettings& s, const Wording& wording) {
  return reporting_errors(wording, [&] {
    if (s.data.test_limit < 0) {
      throw ConfigError("test_limit", "`test_limit` must be >= 0, got " + std::to_string(s.data.test_limit));
    }
    const std::vector<Device> devices = parallel::parse_device_list(s.devices, cuda::device_count());
    infer::TrainedModel trained = infer::load_trained(s.checkpoint);
    const std::shared_ptr<const data::Dataset> test = infer::test_data_for(trained.data, s.data);
    std::printf("evaluating %s from %s (%lld epoch%s, step %lld) on %s: %lld test images from %s\n",
                trained.model.c_str(), s.checkpoint.c_str(), static_cast<long long>(trained.epochs),
                trained.epochs == 1 ? "" : "s", static_cast<long long>(trained.global_step),
                device_list_str(devices).c_str(), static_cast<long long>(test->size()), s.data.data_dir.c_str());
    std::fflush(stdout);
    const infer::Evaluation result =
        infer::evaluate(std::move(trained.net), devices, *test, s.batch_size, parallel::available_cores());
    const std::vector<std::string>& names = trained.data.classes;
    std::printf("%s", report::evaluation_text(result, names).c_str());
    if (!s.confusion_svg.empty()) {
      report::write_confusion_svg(s.confusion_svg, result, names, trained.model + ": confusion matrix");
      std::printf("confusion matrix drawn in %s\n", s.confusion_svg.c_str());
    }
    return 0;
  });
}

}  // namespace dpt::cli
