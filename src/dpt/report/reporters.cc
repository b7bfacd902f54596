#include "dpt/report/reporters.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "dpt/report/svg.h"

namespace dpt::report {

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ProgressBar

ProgressBar::ProgressBar(std::FILE* out, bool is_terminal, int epoch, int epochs, int64_t steps, Clock clock)
    : out_(out),
      terminal_(is_terminal),
      epoch_(epoch),
      epochs_(epochs),
      steps_(steps),
      clock_(clock ? std::move(clock) : Clock(steady_seconds)) {
  if (out_ == nullptr) throw std::invalid_argument("ProgressBar: output stream is null");
  if (steps_ < 0) throw std::invalid_argument("ProgressBar: steps must be >= 0, got " + std::to_string(steps_));
  start_ = clock_();
}

ProgressBar::~ProgressBar() { finish(); }

bool ProgressBar::is_terminal(std::FILE* out) {
  if (out == nullptr) return false;
  const int fd = fileno(out);
  return fd >= 0 && isatty(fd) == 1;
}

void ProgressBar::update(int64_t step, double running_loss, double running_acc) {
  if (step < 0 || step > steps_) {
    throw std::invalid_argument("ProgressBar: step " + std::to_string(step) + " outside 0.." + std::to_string(steps_));
  }
  step_ = step;
  loss_ = running_loss;
  acc_ = running_acc;
  if (!terminal_ || finished_) return;
  const double now = clock_();
  // Throttled, but the first and the last step always show.
  if (drawn_any_ && step != steps_ && now - last_draw_ < kMinRedrawSeconds) return;
  last_draw_ = now;
  draw();
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (!terminal_) return;
  if (drawn_step_ != step_ || !drawn_any_) draw();
  std::fputc('\n', out_);
  std::fflush(out_);
}

void ProgressBar::draw() {
  const double fraction = steps_ == 0 ? 1.0 : static_cast<double>(step_) / static_cast<double>(steps_);
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kBarWidth - filled), '.');
  std::string line =
      strprintf("epoch %d/%d [%s] %lld/%lld  loss %.3f  acc %.3f  %.1f s", epoch_, epochs_, bar.c_str(),
                static_cast<long long>(step_), static_cast<long long>(steps_), loss_, acc_, clock_() - start_);
  const size_t width = line.size();
  // Blank out whatever a longer previous line left behind.
  if (width < last_width_) line.append(last_width_ - width, ' ');
  last_width_ = width;
  std::fputc('\r', out_);
  std::fputs(line.c_str(), out_);
  std::fflush(out_);
  drawn_any_ = true;
  drawn_step_ = step_;
}

// ---------------------------------------------------------------------------------------------
// MetricsWriter

MetricsWriter::MetricsWriter(const std::filesystem::path& file, bool append) : path_(file) {
  file_.reset(std::fopen(file.c_str(), append ? "a" : "w"));
  if (!file_) {
    throw std::runtime_error("cannot open metrics file " + file.string() + ": " + std::strerror(errno));
  }
}

void MetricsWriter::write(const EpochStats& stats, const std::vector<std::string>& devices) {
  // ordered_json keeps the fields in the documented order.
  nlohmann::ordered_json line;
  line["epoch"] = stats.epoch;
  line["train_loss"] = stats.train_loss;
  line["train_acc"] = stats.train_acc;
  line["test_acc"] = stats.test_acc;
  line["seconds"] = stats.seconds;
  line["examples_per_sec"] = stats.examples_per_sec;
  line["eval_seconds"] = stats.eval_seconds;
  line["bytes_within_process"] = stats.bytes_within_process;
  line["bytes_between_processes"] = stats.bytes_between_processes;
  line["devices"] = devices;
  const std::string text = line.dump() + "\n";
  errno = 0;
  if (std::fputs(text.c_str(), file_.get()) == EOF || std::fflush(file_.get()) != 0) {
    throw std::runtime_error("cannot write metrics file " + path_.string() + ": " + std::strerror(errno));
  }
}

// ---------------------------------------------------------------------------------------------
// SVG plot

namespace {

// Layout in SVG user units (pixels at 100%). The legend sits right of the plot area so it
// can never cover a curve.
constexpr double kWidth = 640, kHeight = 400;
constexpr double kPlotLeft = 72, kPlotRight = 492, kPlotTop = 44, kPlotBottom = 336;
constexpr double kXPad = 14;  // keeps the first and last markers off the axes

struct Series {
  const char* label;
  const char* color;
  const char* dash;    // stroke-dasharray, empty for solid
  const char* marker;  // circle | square | triangle
  double EpochStats::*field;
};

constexpr Series kSeries[] = {
    {"train loss", "#1f77b4", "", "circle", &EpochStats::train_loss},
    {"train acc", "#c2189b", "7,4", "square", &EpochStats::train_acc},
    {"test acc", "#2ca02c", "1.5,4", "triangle", &EpochStats::test_acc},
};

// The smallest of 1, 2, 2.5, 5 times a power of ten that divides `range` into at most
// `target` steps.
double nice_step(double range, int target) {
  if (!(range > 0)) return 1;
  const double raw = range / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * magnitude >= raw * (1 - 1e-9)) return m * magnitude;
  }
  return 10 * magnitude;
}

// Decimals needed to print multiples of `step` exactly (0.25 -> 2, 0.5 -> 1, 2 -> 0).
int decimals_for(double step) {
  for (int d = 0; d < 4; ++d) {
    const double scaled = step * std::pow(10.0, d);
    if (std::fabs(scaled - std::round(scaled)) < 1e-6) return d;
  }
  return 4;
}

// A point marker of `s` centred on (x, y); `scale` 1 is the full size.
std::string marker(const Series& s, double x, double y, double scale = 1) {
  if (std::strcmp(s.marker, "circle") == 0) {
    return strprintf("<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" fill=\"%s\"/>", x, y, 3.5 * scale, s.color);
  }
  if (std::strcmp(s.marker, "square") == 0) {
    const double h = 3.25 * scale;
    return strprintf("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>", x - h, y - h, 2 * h,
                     2 * h, s.color);
  }
  return strprintf("<polygon points=\"%.2f,%.2f %.2f,%.2f %.2f,%.2f\" fill=\"%s\"/>", x, y - 4.5 * scale,
                   x - 4.2 * scale, y + 3 * scale, x + 4.2 * scale, y + 3 * scale, s.color);
}

std::string line_style(const Series& s) {
  std::string style = strprintf("fill=\"none\" stroke=\"%s\" stroke-width=\"2\" stroke-linejoin=\"round\"", s.color);
  if (s.dash[0] != '\0') style += strprintf(" stroke-dasharray=\"%s\"", s.dash);
  if (std::strcmp(s.dash, "1.5,4") == 0) style += " stroke-linecap=\"round\"";
  return style;
}

}  // namespace

std::string svg_plot(const std::vector<EpochStats>& history, const std::string& title) {
  if (history.empty()) throw std::invalid_argument("cannot plot an empty training history (no finished epoch)");
  double value_lo = 0, value_hi = 1;
  int epoch_lo = history.front().epoch, epoch_hi = history.front().epoch;
  for (const EpochStats& e : history) {
    for (const Series& s : kSeries) {
      const double v = e.*s.field;
      if (!std::isfinite(v)) {
        throw std::invalid_argument(strprintf("cannot plot epoch %d: %s is %g", e.epoch, s.label, v));
      }
      value_lo = std::min(value_lo, v);
      value_hi = std::max(value_hi, v);
    }
    epoch_lo = std::min(epoch_lo, e.epoch);
    epoch_hi = std::max(epoch_hi, e.epoch);
  }

  // y: 0 (or below, for a negative value) .. max(1, largest value), rounded out to whole ticks.
  const double y_step = nice_step(value_hi - value_lo, 5);
  const double y_lo = std::floor(value_lo / y_step + 1e-9) * y_step;
  const double y_hi = std::ceil(value_hi / y_step - 1e-9) * y_step;
  // x: the epochs; a single epoch gets half an epoch either side so its point sits mid-plot.
  const double x_lo = epoch_lo == epoch_hi ? epoch_lo - 0.5 : epoch_lo;
  const double x_hi = epoch_lo == epoch_hi ? epoch_hi + 0.5 : epoch_hi;
  const int x_step = std::max(1, static_cast<int>(std::ceil(nice_step(x_hi - x_lo, 10))));

  auto px = [&](double epoch) {
    return kPlotLeft + kXPad + (epoch - x_lo) / (x_hi - x_lo) * (kPlotRight - kPlotLeft - 2 * kXPad);
  };
  auto py = [&](double v) { return kPlotBottom - (v - y_lo) / (y_hi - y_lo) * (kPlotBottom - kPlotTop); };

  std::string svg;
  svg += strprintf(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n",
      kWidth, kHeight, kWidth, kHeight);
  svg += "<title>" + xml_escape(title) + "</title>\n";
  svg += strprintf("<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", kWidth, kHeight);
  svg += strprintf("<text x=\"%.2f\" y=\"26\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
                   (kPlotLeft + kPlotRight) / 2, xml_escape(title).c_str());

  // Grid, ticks and tick labels.
  svg += "<g stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
  const int y_ticks = static_cast<int>(std::lround((y_hi - y_lo) / y_step));
  for (int i = 0; i <= y_ticks; ++i) {
    const double y = py(y_lo + i * y_step);
    svg += strprintf("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", kPlotLeft, y, kPlotRight, y);
  }
  const int first_x_tick = static_cast<int>(std::ceil(x_lo / x_step)) * x_step;
  for (int t = first_x_tick; t <= x_hi; t += x_step) {
    if (t < x_lo) continue;
    const double x = px(t);
    svg += strprintf("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", x, kPlotTop, x, kPlotBottom);
  }
  svg += "</g>\n";

  svg += "<g stroke=\"#333\" stroke-width=\"1\">\n";
  svg += strprintf("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", kPlotLeft, kPlotBottom, kPlotRight,
                   kPlotBottom);
  svg += strprintf("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", kPlotLeft, kPlotTop, kPlotLeft,
                   kPlotBottom);
  for (int i = 0; i <= y_ticks; ++i) {
    const double y = py(y_lo + i * y_step);
    svg += strprintf("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", kPlotLeft - 5, y, kPlotLeft, y);
  }
  for (int t = first_x_tick; t <= x_hi; t += x_step) {
    if (t < x_lo) continue;
    const double x = px(t);
    svg += strprintf("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>\n", x, kPlotBottom, x, kPlotBottom + 5);
  }
  svg += "</g>\n";

  svg += "<g fill=\"#333\">\n";
  const int y_decimals = decimals_for(y_step);
  for (int i = 0; i <= y_ticks; ++i) {
    const double v = y_lo + i * y_step;
    svg += strprintf("<text x=\"%.2f\" y=\"%.2f\" dy=\"0.35em\" text-anchor=\"end\">%.*f</text>\n", kPlotLeft - 8,
                     py(v), y_decimals, std::fabs(v) < 1e-12 ? 0.0 : v);
  }
  for (int t = first_x_tick; t <= x_hi; t += x_step) {
    if (t < x_lo) continue;
    svg += strprintf("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">%d</text>\n", px(t), kPlotBottom + 19, t);
  }
  svg += strprintf("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" font-size=\"13\">epoch</text>\n",
                   (kPlotLeft + kPlotRight) / 2, kPlotBottom + 42);
  svg += strprintf(
      "<text x=\"0\" y=\"0\" text-anchor=\"middle\" font-size=\"13\" transform=\"translate(20 %.2f) rotate(-90)\">"
      "loss / accuracy</text>\n",
      (kPlotTop + kPlotBottom) / 2);
  svg += "</g>\n";

  // The curves, then their markers on top.
  for (const Series& s : kSeries) {
    std::string points;
    for (const EpochStats& e : history) {
      if (!points.empty()) points += ' ';
      points += strprintf("%.2f,%.2f", px(e.epoch), py(e.*s.field));
    }
    svg += strprintf("<polyline %s points=\"%s\"/>\n", line_style(s).c_str(), points.c_str());
  }
  // Markers shrink as epochs crowd together, so over a long run they do not bury the line
  // styles; below kMinMarkerSpacing pixels per epoch the lines alone carry the series.
  constexpr double kFullMarkerSpacing = 14, kMinMarkerSpacing = 5;
  const double spacing = px(x_lo + 1) - px(x_lo);
  if (spacing >= kMinMarkerSpacing) {
    const double scale = std::min(1.0, spacing / kFullMarkerSpacing);
    for (const Series& s : kSeries) {
      svg += "<g>";
      for (const EpochStats& e : history) svg += marker(s, px(e.epoch), py(e.*s.field), scale);
      svg += "</g>\n";
    }
  }

  // Legend, right of the plot area.
  const double legend_x = kPlotRight + 16, legend_y = kPlotTop;
  svg +=
      strprintf("<rect x=\"%.2f\" y=\"%.2f\" width=\"118\" height=\"78\" fill=\"white\" stroke=\"#bbb\" rx=\"3\"/>\n",
                legend_x, legend_y);
  for (size_t i = 0; i < std::size(kSeries); ++i) {
    const Series& s = kSeries[i];
    const double y = legend_y + 18 + 22 * static_cast<double>(i);
    svg += strprintf("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" %s/>", legend_x + 10, y, legend_x + 40, y,
                     line_style(s).c_str());
    svg += marker(s, legend_x + 25, y);
    svg += strprintf("<text x=\"%.2f\" y=\"%.2f\" dy=\"0.35em\" fill=\"#333\">%s</text>\n", legend_x + 48, y, s.label);
  }
  svg += "</svg>\n";
  return svg;
}

void write_svg_plot(const std::filesystem::path& file, const std::vector<EpochStats>& history,
                    const std::string& title) {
  write_svg_file(file, svg_plot(history, title));
}

}  // namespace dpt::report
