// What the training loop shows and keeps: a progress bar for the terminal, one JSON line
// per epoch (machine-readable, survives a crash), and the lesson's loss/accuracy curves as
// a self-contained SVG (the d2l Animator, without Python).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpt/train/stats.h"  // EpochStats

namespace dpt::report {

using train::EpochStats;

// One line per epoch, redrawn in place with '\r' on a terminal:
//   epoch 3/10 [##########..........] 120/235  loss 0.512  acc 0.811  12.3 s
// Redraws are throttled to one per kMinRedrawSeconds (the last step always draws), so a fast
// loop does not spend its time on the terminal. When `out` is not a terminal nothing is
// printed at all: logs get the caller's plain per-epoch lines instead of '\r' noise.
class ProgressBar {
 public:
  // Monotonic seconds; injectable so tests can drive the throttling.
  using Clock = std::function<double()>;
  static constexpr double kMinRedrawSeconds = 0.1;
  static constexpr int kBarWidth = 20;

  // `steps` is the number of minibatches in the epoch; `clock` defaults to steady_clock.
  ProgressBar(std::FILE* out, bool is_terminal, int epoch, int epochs, int64_t steps, Clock clock = {});
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Whether `out` is an interactive terminal (isatty on its descriptor).
  static bool is_terminal(std::FILE* out);

  // After step `step` (1-based, at most `steps`) of the epoch.
  void update(int64_t step, double running_loss, double running_acc);
  // Draws the last state and ends the line; called by the destructor if not called before.
  void finish();

 private:
  void draw();

  std::FILE* out_;
  bool terminal_;
  int epoch_;
  int epochs_;
  int64_t steps_;
  Clock clock_;
  double start_ = 0;
  double last_draw_ = 0;
  bool drawn_any_ = false;
  bool finished_ = false;
  int64_t step_ = 0;
  int64_t drawn_step_ = -1;
  double loss_ = 0;
  double acc_ = 0;
  size_t last_width_ = 0;
};

// Writes one JSON object per line per epoch, flushed at once, so a crash keeps every finished
// epoch:  {"epoch":1,"train_loss":...,"train_acc":...,"test_acc":...,"seconds":...,
//          "examples_per_sec":...,"eval_seconds":...,"devices":["cpu:0","cpu:1"]}
class MetricsWriter {
 public:
  // Opens `file`, truncating it or (for a resumed run) appending to it; throws
  // std::runtime_error naming the path and the reason.
  explicit MetricsWriter(const std::filesystem::path& file, bool append = false);
  // Appends one line and flushes; throws std::runtime_error if the write fails.
  void write(const EpochStats& stats, const std::vector<std::string>& devices);
  const std::filesystem::path& path() const { return path_; }

 private:
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::filesystem::path path_;
  std::unique_ptr<std::FILE, Closer> file_;
};

// The SVG text of the plot: train loss (solid blue), train acc (dashed magenta) and test acc
// (dotted green) against epoch, with point markers (smaller, then none, as epochs crowd together),
// axes, ticks, grid, legend and title.
// The y axis runs from 0 to max(1, largest loss) rounded up to a whole tick. Throws
// std::invalid_argument for an empty history or a non-finite value.
std::string svg_plot(const std::vector<EpochStats>& history, const std::string& title);

// Writes svg_plot(history, title) to `file`; throws std::runtime_error naming the path and
// the reason if it cannot.
void write_svg_plot(const std::filesystem::path& file, const std::vector<EpochStats>& history,
                    const std::string& title);

}  // namespace dpt::report
