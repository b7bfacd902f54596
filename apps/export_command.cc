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
    exporter::write_onnx(s.onnx_file, *trained.net,
                         trained.model + " trained by dptrain, from " + s.checkpoint + " (step " +
                             std::to_string(trained.global_step) + ")");
    std::printf("wrote %s: %s from %s, ONNX opset %d, input images [N, 1, 28, 28] in [0, 1], output logits "
                "[N, 10], %.2f MB\n",
                s.onnx_file.c_str(), trained.model.c_str(), s.checkpoint.c_str(), exporter::kOnnxOpset,
                static_cast<double>(std::filesystem::file_size(s.onnx_file)) / 1e6);
    return 0;
  });
}

}  // namespace dpt::cli
