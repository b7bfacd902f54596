// What a training job shows its user, for both APIs: a progress line per step on a
// terminal, one line per epoch, the metrics file (one JSON line per epoch), the plot
// (redrawn after every epoch), warnings, and where a resumed run continues from.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dpt/report/reporters.h"
#include "dpt/train/stats.h"
#include "dpt/train/training_loop.h"

namespace dpt::report {

using train::EpochCallback;
using train::EpochStats;
using train::ResumeInfo;
using train::RunOptions;
using train::StepCallback;

struct ConsoleReporterOptions {
  int epochs = 10;             // for "epoch 3/10"
  std::string metrics_file;    // empty: none
  bool append_metrics = false; // a resumed run adds its epochs to the metrics of the run it continues
  std::string plot_file;       // empty: none
  std::string plot_title;
  // A message's wording for this user (the CLI: backquoted fields into flags); empty: as is.
  std::function<std::string(const std::string&)> wording;
  std::string progress = "auto";  // kProgresses (config.h), see show_progress
};

// Whether the per-step progress line is drawn: "on" always, "off" never, "auto" when
// stdout is a terminal and the process was not started by mpirun (`under_mpirun`: Open
// MPI's OMPI_COMM_WORLD_RANK is set), whose forwarded output would interleave the ranks'
// redrawn lines. Throws std::invalid_argument for another mode.
bool show_progress(std::string_view mode, bool stdout_is_terminal, bool under_mpirun);

class ConsoleReporter {
 public:
  // Opens the metrics file now, so that a bad path fails before training.
  ConsoleReporter(ConsoleReporterOptions options, std::vector<std::string> device_names);

  void on_resume(const ResumeInfo& info);
  void warn(const std::string& message);  // "dptrain: warning: ..." on stderr
  void on_step(int epoch, int64_t step, int64_t steps, double loss, double acc);
  void on_epoch(const EpochStats& stats);

  StepCallback step_callback();
  EpochCallback epoch_callback();
  // The RunOptions hooks that report through this object: warn and on_resume.
  void attach(RunOptions& run);

 private:
  ConsoleReporterOptions options_;
  bool terminal_;
  std::vector<std::string> device_names_;
  std::optional<ProgressBar> bar_;
  std::optional<MetricsWriter> metrics_;
  std::vector<EpochStats> history_;
};

}  // namespace dpt::report
