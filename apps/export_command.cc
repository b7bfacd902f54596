// `dptrain export`: a checkpoint's network as an ONNX model.
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "dpt/core/config_error.h"
#include "dpt/export/onnx_export.h"
#include "dpt/infer/model.h"

namespace dpt::cli {

int run_export(const ExportSettings& s, const Wording& wording) {
  return reporting_errors(wording, [&] {
    if (s.onnx_file.empty()) throw ConfigError("onnx_file", "`onnx_file` names no file");
    const infer::TrainedModel trained = infer::load_trained(s.checkpoint);
    const ImageShape& in = trained.data.shape;
    const int64_t classes = static_cast<int64_t>(trained.data.classes.size());
    exporter::write_onnx(s.onnx_file, *trained.net, {in, classes},
                         trained.model + " trained by dptrain, from " + s.checkpoint + " (step " +
                             std::to_string(trained.global_step) + ")");
    const std::string range = trained.data.mean.empty() ? "in [0, 1]" : "normalized per channel as in training";
    std::printf("wrote %s: %s from %s, ONNX opset %d, input images [N, %lld, %lld, %lld] %s, output logits "
                "[N, %lld], %.2f MB\n",
                s.onnx_file.c_str(), trained.model.c_str(), s.checkpoint.c_str(), exporter::kOnnxOpset,
                static_cast<long long>(in.channels), static_cast<long long>(in.height), static_cast<long long>(in.width),
                range.c_str(), static_cast<long long>(classes),
                static_cast<double>(std::filesystem::file_size(s.onnx_file)) / 1e6);
    return 0;
  });
}

}  // namespace dpt::cli
