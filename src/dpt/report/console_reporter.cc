#include "dpt/report/console_reporter.h"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "dpt/report/svg.h"

namespace dpt::report {

bool show_progress(std::string_view mode, bool stdout_is_terminal, bool under_mpirun) {
  if (mode == "on") return true;
  if (mode == "off") return false;
  if (mode == "auto") return stdout_is_terminal && !under_mpirun;
  throw std::invalid_argument("show_progress: unknown mode '" + std::string(mode) + "'");
}

ConsoleReporter::ConsoleReporter(ConsoleReporterOptions options, std::vector<std::string> device_names)
    : options_(std::move(options)),
      terminal_(show_progress(options_.progress, ProgressBar::is_terminal(stdout),
                              std::getenv("OMPI_COMM_WORLD_RANK") != nullptr)),
      device_names_(std::move(device_names)) {
  if (!options_.metrics_file.empty()) metrics_.emplace(options_.metrics_file, options_.append_metrics);
  if (!options_.plot_file.empty()) check_writable(options_.plot_file, "SVG plot");  // fails now, not after an epoch
}

void ConsoleReporter::on_resume(const ResumeInfo& info) {
  std::string written_on;
  for (const std::string& d : info.written_on) written_on += (written_on.empty() ? "" : ", ") + d;
  std::printf("resuming from %s: epoch %lld, batch %lld (%lld steps taken, written on [%s])\n", info.file.c_str(),
              static_cast<long long>(info.position.epoch + 1), static_cast<long long>(info.position.batch_offset),
              static_cast<long long>(info.position.global_step), written_on.c_str());
  std::fflush(stdout);
  history_ = info.history;  // the plot shows the whole run
}

void ConsoleReporter::warn(const std::string& message) {
  if (bar_) {
    bar_->finish();
    bar_.reset();
  }
  const std::string text = options_.wording ? options_.wording(message) : message;
  std::fprintf(stderr, "dptrain: warning: %s\n", text.c_str());
}

void ConsoleReporter::on_step(int epoch, int64_t step, int64_t steps, double loss, double acc) {
  if (!terminal_) return;
  if (!bar_ || step == 1) bar_.emplace(stdout, true, epoch, options_.epochs, steps);
  bar_->update(step, loss, acc);
}

void ConsoleReporter::on_epoch(const EpochStats& s) {
  if (bar_) {
    bar_->finish();
    bar_.reset();
  }
  std::printf("epoch %d/%d: loss %.3f, train acc %.3f, test acc %.3f, %.1f sec, %.0f examples/sec, eval %.2f sec\n",
              s.epoch, options_.epochs, s.train_loss, s.train_acc, s.test_acc, s.seconds, s.examples_per_sec,
              s.eval_seconds);
  std::fflush(stdout);
  history_.push_back(s);
  if (metrics_) metrics_->write(s, device_names_);
  if (!options_.plot_file.empty()) write_svg_plot(options_.plot_file, history_, options_.plot_title);
}

StepCallback ConsoleReporter::step_callback() {
  return [this](int e, int64_t s, int64_t n, double l, double a) { on_step(e, s, n, l, a); };
}

EpochCallback ConsoleReporter::epoch_callback() {
  return [this](const EpochStats& s) { on_epoch(s); };
}

void ConsoleReporter::attach(RunOptions& run) {
  run.warn = [this](const std::string& m) { warn(m); };
  run.on_resume = [this](const ResumeInfo& info) { on_resume(info); };
}

}  // namespace dpt::report
