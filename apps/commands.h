// The subcommands that use what training wrote (evaluate, predict, export): each takes its
// settings as a plain struct that cli.cc fills from the flags, runs, prints, and returns
// the exit status (0, or 1 after printing "dptrain: error: ..." on stderr).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dpt/data/source.h"

namespace dpt::cli {

// The front end's wording of library messages: backquoted config fields become flags.
using Wording = std::function<std::string(const std::string&)>;

struct EvaluateSettings {
  std::string checkpoint;
  std::string devices = "cpu:1";
  data::DataOptions data;  // its test split is read (test_limit: the first N only)
  int64_t batch_size = 256;
  std::string confusion_svg;  // empty: no picture
};
int run_evaluate(const EvaluateSettings& settings, const Wording& wording);

struct PredictSettings {
  std::string checkpoint;
  std::vector<std::string> images;
  int top_k = 3;
  bool json = false;
  int64_t max_image_pixels = data::kDefaultMaxImagePixels;
};
int run_predict(const PredictSettings& settings, const Wording& wording);

struct ExportSettings {
  std::string checkpoint;
  std::string onnx_file;
};
int run_export(const ExportSettings& settings, const Wording& wording);

// Runs `body`, printing what it throws as "dptrain: error: MESSAGE" (worded) and
// returning 1; else body's status.
int reporting_errors(const Wording& wording, const std::function<int()>& body);

}  // namespace dpt::cli
