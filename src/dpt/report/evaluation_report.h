// An infer::Evaluation shown to a person: the text `dptrain evaluate` prints and the
// confusion matrix as an SVG picture.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "dpt/infer/evaluation.h"

namespace dpt::report {

// The report `dptrain evaluate` prints: the accuracy, one line per class with its accuracy
// and count, and the confusion matrix (rows: true class, columns: predicted class).
std::string evaluation_text(const infer::Evaluation& evaluation, const std::vector<std::string>& class_names);

// The confusion matrix as an SVG picture: one cell per (true, predicted) pair shaded by the
// share of the true class's examples it holds, the count written in it, the class names
// along both axes and each class's accuracy at the end of its row.
std::string confusion_svg(const infer::Evaluation& evaluation, const std::vector<std::string>& class_names,
                          const std::string& title);

// Writes confusion_svg(...) to `file`; throws std::runtime_error naming the path and reason.
void write_confusion_svg(const std::filesystem::path& file, const infer::Evaluation& evaluation,
                         const std::vector<std::string>& class_names, const std::string& title);

}  // namespace dpt::report
