#include "dpt/report/trace_timeline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "dpt/report/svg.h"

namespace dpt::report {

namespace {

constexpr double kWidth = 1100, kLabelWidth = 170, kRight = 20, kTop = 58, kRow = 16, kGap = 10;

struct Window {
  double begin_us = 0, end_us = 0;
  std::vector<std::pair<double, int>> step_starts;  // (time, step)
};

bool is_iteration(const TimelineSpan& s) { return s.process == 0 && s.lane == 0 && s.name == "iteration"; }

// The iterations drawn: `steps` of them after the first `skip`, or the last ones of a
// shorter run; with no iterations at all, every span.
Window choose_window(const std::vector<TimelineSpan>& spans, int skip, int steps, Timeline& out) {
  std::vector<const TimelineSpan*> iterations;
  for (const TimelineSpan& s : spans) {
    if (is_iteration(s)) iterations.push_back(&s);
  }
  std::sort(iterations.begin(), iterations.end(),
            [](const TimelineSpan* a, const TimelineSpan* b) { return a->begin_us < b->begin_us; });
  Window w;
  if (iterations.empty()) {
    w.begin_us = spans.empty() ? 0 : spans.front().begin_us;
    w.end_us = w.begin_us;
    for (const TimelineSpan& s : spans) {
      w.begin_us = std::min(w.begin_us, s.begin_us);
      w.end_us = std::max(w.end_us, s.end_us);
    }
    return w;
  }
  const int n = static_cast<int>(iterations.size());
  const int first = n >= skip + steps ? skip : std::max(0, n - steps);
  const int last = std::min(n, first + steps) - 1;
  w.begin_us = iterations[first]->begin_us;
  w.end_us = iterations[last]->end_us;
  for (int i = first; i <= last; ++i) w.step_starts.emplace_back(iterations[i]->begin_us, iterations[i]->arg);
  out.first_step = static_cast<int>(iterations[first]->arg);
  out.last_step = static_cast<int>(iterations[last]->arg);
  return w;
}

const char* color_of(const std::string& name) {
  static const std::map<std::string, const char*> colors{
      {"forward", "#4e79a7"},  {"backward", "#f28e2b"},         {"update", "#59a14f"},
      {"allreduce", "#e15759"}, {"bucket allreduce", "#e15759"}, {"buffers", "#b07aa1"},
      {"tree sum", "#e15759"},  {"data", "#9c755f"},             {"guard", "#bab0ac"},
      {"evaluate", "#76b7b2"},  {"checkpoint", "#edc948"},       {"within process", "#ff9da7"},
      {"between processes", "#9d2b2f"}};
  const auto found = colors.find(name);
  return found == colors.end() ? "#cccccc" : found->second;
}

// What the host row shows: the loop's own work, not the spans that wait for the devices.
bool drawn_on_host_row(const TimelineSpan& s) { return s.name != "iteration" && s.name != "step"; }

int device_of(int lane) { return (lane - 1) / 2; }

// `intervals` sorted and merged into disjoint ones.
std::vector<std::pair<double, double>> merged(std::vector<std::pair<double, double>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& iv : intervals) {
    if (!out.empty() && iv.first <= out.back().second) {
      out.back().second = std::max(out.back().second, iv.second);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}

double length(const std::vector<std::pair<double, double>>& intervals) {
  double total = 0;
  for (const auto& [a, b] : intervals) total += b - a;
  return total;
}

double intersection(const std::vector<std::pair<double, double>>& a, const std::vector<std::pair<double, double>>& b) {
  double total = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const double lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (hi > lo) total += hi - lo;
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return total;
}

double nice_tick(double span_us) {
  const double raw = span_us / 8;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10 * magnitude;
}

}  // namespace

Timeline draw_timeline(const std::vector<TimelineSpan>& spans, const std::vector<TimelineLane>& lanes, int skip,
                       int steps) {
  Timeline out;
  const Window w = choose_window(spans, skip, steps, out);
  const double span_us = std::max(w.end_us - w.begin_us, 1.0);
  const double plot_width = kWidth - kLabelWidth - kRight;
  const auto x_of = [&](double t) { return kLabelWidth + (std::clamp(t, w.begin_us, w.end_us) - w.begin_us) / span_us * plot_width; };

  std::map<std::pair<int, int>, std::string> lane_name;
  for (const TimelineLane& l : lanes) lane_name[{l.process, l.lane}] = l.name;
  std::set<int> processes;
  std::map<int, std::set<int>> devices;  // process -> its devices
  for (const TimelineSpan& s : spans) {
    processes.insert(s.process);
    if (s.lane > 0) devices[s.process].insert(device_of(s.lane));
  }
  const bool many_processes = processes.size() > 1;

  // Rows: per process a host row, then per device a compute row over a communication row.
  std::map<std::pair<int, int>, double> host_y, compute_y;  // (process, device) -> row top
  std::string labels;
  double y = kTop;
  for (const int p : processes) {
    const std::string prefix = many_processes ? "rank " + std::to_string(p) + " " : "";
    host_y[{p, 0}] = y;
    labels += strprintf("<text x='%.0f' y='%.1f' text-anchor='end'>%s</text>\n", kLabelWidth - 8, y + kRow - 4,
                        xml_escape(prefix + "host").c_str());
    y += kRow + kGap;
    for (const int d : devices[p]) {
      const auto name = lane_name.find({p, 2 * d + 1});
      const std::string device = prefix + (name == lane_name.end() ? "device " + std::to_string(d) : name->second);
      compute_y[{p, d}] = y;
      labels += strprintf("<text x='%.0f' y='%.1f' text-anchor='end'>%s</text>\n", kLabelWidth - 8, y + kRow + 4,
                          xml_escape(device).c_str());
      labels += strprintf("<text x='%.0f' y='%.1f' text-anchor='end' class='small'>compute / communication</text>\n",
                          kLabelWidth - 8, y + 2 * kRow + 2);
      y += 2 * kRow + kGap;
      out.overlap.push_back({device, 0, 0});
    }
  }
  const double height = y + 40;

  std::string bars;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> compute_time, communication_time;
  for (const TimelineSpan& s : spans) {
    if (s.end_us <= w.begin_us || s.begin_us >= w.end_us) continue;
    double top = 0;
    if (s.category == "host") {
      if (s.lane != 0 || !drawn_on_host_row(s)) continue;
      top = host_y[{s.process, 0}];
    } else {
      const std::pair<int, int> key{s.process, device_of(s.lane)};
      const bool compute = s.category == "compute";
      top = compute_y[key] + (compute ? 0 : kRow);
      const std::pair<double, double> clipped{std::max(s.begin_us, w.begin_us), std::min(s.end_us, w.end_us)};
      (compute ? compute_time : communication_time)[key].push_back(clipped);
    }
    const double x0 = x_of(s.begin_us), x1 = x_of(s.end_us);
    bars += strprintf("<rect x='%.2f' y='%.1f' width='%.2f' height='%.0f' fill='%s'><title>%s %.3f ms</title></rect>\n",
                      x0, top + 1, std::max(x1 - x0, 0.5), kRow - 2, color_of(s.name), xml_escape(s.name).c_str(),
                      (s.end_us - s.begin_us) / 1e3);
  }
  size_t row = 0;
  for (const int p : processes) {
    for (const int d : devices[p]) {
      const auto communication = merged(communication_time[{p, d}]);
      out.overlap[row].communication_us = length(communication);
      out.overlap[row].overlapped_us = intersection(communication, merged(compute_time[{p, d}]));
      ++row;
    }
  }

  std::string axis;
  const double tick = nice_tick(span_us);
  for (double t = 0; t <= span_us + 1e-9; t += tick) {
    const double x = x_of(w.begin_us + t);
    axis += strprintf("<line x1='%.2f' y1='%.0f' x2='%.2f' y2='%.0f' stroke='#dddddd'/>\n", x, kTop - 6, x, height - 40);
    axis += strprintf("<text x='%.2f' y='%.0f' text-anchor='middle' class='small'>%g ms</text>\n", x, kTop - 10, t / 1e3);
  }
  for (const auto& [t, step] : w.step_starts) {
    const double x = x_of(t);
    axis += strprintf("<line x1='%.2f' y1='%.0f' x2='%.2f' y2='%.0f' stroke='#333333' stroke-dasharray='4 3'/>\n", x,
                      kTop - 4, x, height - 40);
    axis += strprintf("<text x='%.2f' y='%.0f' class='small'>step %d</text>\n", x + 3, height - 28, step);
  }
  std::string legend;
  double lx = kLabelWidth;
  for (const char* name : {"data", "forward", "backward", "update", "allreduce", "buffers", "guard"}) {
    legend += strprintf("<rect x='%.0f' y='%.0f' width='12' height='12' fill='%s'/>", lx, height - 18, color_of(name));
    legend += strprintf("<text x='%.0f' y='%.0f' class='small'>%s</text>\n", lx + 16, height - 8, name);
    lx += 100;
  }
  const std::string title =
      w.step_starts.empty() ? "dptrain trace: the whole run"
                            : strprintf("dptrain trace: steps %d to %d, compute against communication per device",
                                        out.first_step, out.last_step);
  out.svg = strprintf(
                "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' font-family='sans-serif' "
                "font-size='12'>\n<style>.small{font-size:10px}</style>\n"
                "<rect width='100%%' height='100%%' fill='white'/>\n<text x='%.0f' y='20' font-size='14'>%s</text>\n",
                kWidth, height, kLabelWidth, xml_escape(title).c_str()) +
            axis + labels + bars + legend + "</svg>\n";
  return out;
}

}  // namespace dpt::report
