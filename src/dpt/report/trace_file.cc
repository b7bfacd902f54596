#include "dpt/report/trace_file.h"

#include <nlohmann/json.hpp>

#include "dpt/core/trace.h"
#include "dpt/parallel/process_group.h"
#include "dpt/report/svg.h"
#include "dpt/report/trace_timeline.h"

namespace dpt::report {

namespace {

using nlohmann::json;

// One process's part of the trace: its lanes' names (metadata events) and its spans, with
// the rank as the process id. Times in microseconds, as the format has them.
json process_events(int rank) {
  json events = json::array();
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", rank}, {"tid", 0},
                    {"args", {{"name", "rank " + std::to_string(rank)}}}});
  for (const trace::LaneName& lane : trace::lane_names()) {
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", rank}, {"tid", lane.lane},
                      {"args", {{"name", lane.name}}}});
    events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", rank}, {"tid", lane.lane},
                      {"args", {{"sort_index", lane.lane}}}});
  }
  for (const trace::Event& e : trace::take_events()) {
    json event = {{"ph", "X"},
                  {"name", trace::phase_name(e.phase)},
                  {"cat", trace::category_name(trace::phase_category(e.phase))},
                  {"pid", rank},
                  {"tid", e.lane},
                  {"ts", static_cast<double>(e.begin_ns) / 1e3},
                  {"dur", static_cast<double>(e.end_ns - e.begin_ns) / 1e3}};
    if (e.arg >= 0) {
      const char* key = e.phase == trace::Phase::bucket_allreduce ? "bucket"
                        : e.phase == trace::Phase::iteration     ? "step"
                                                                 : "chunk";
      event["args"] = {{key, e.arg}};
    }
    events.push_back(std::move(event));
  }
  return events;
}

void split_for_timeline(const json& events, std::vector<TimelineSpan>& spans, std::vector<TimelineLane>& lanes) {
  for (const json& e : events) {
    if (e["ph"] == "M") {
      if (e["name"] == "thread_name") lanes.push_back({e["pid"], e["tid"], e["args"]["name"]});
      continue;
    }
    TimelineSpan span{e["name"], e["cat"], e["pid"], e["tid"], e["ts"], e["ts"].get<double>() + e["dur"].get<double>()};
    if (e.contains("args") && e["args"].contains("step")) span.arg = e["args"]["step"];
    spans.push_back(std::move(span));
  }
}

std::string overlap_summary(const Timeline& timeline) {
  std::string line = strprintf("steps %d to %d:", timeline.first_step, timeline.last_step);
  for (const DeviceOverlap& d : timeline.overlap) {
    const double share = d.communication_us > 0 ? 100.0 * d.overlapped_us / d.communication_us : 0.0;
    line += strprintf(" %s communicated %.2f ms (%.0f%% while it computed),", d.device.c_str(),
                      d.communication_us / 1e3, share);
  }
  line.pop_back();
  return line;
}

}  // namespace

void start_trace() { trace::enable(); }

std::string timeline_file(const std::string& trace_file) {
  const std::string suffix = ".json";
  const bool has_suffix = trace_file.size() > suffix.size() && trace_file.ends_with(suffix);
  return (has_suffix ? trace_file.substr(0, trace_file.size() - suffix.size()) : trace_file) + ".timeline.svg";
}

std::string write_trace(const std::string& trace_file, const parallel::ProcessGroup& group) {
  const std::vector<std::string> parts = parallel::gather_strings(group, process_events(group.rank).dump());
  if (!group.is_root()) return "";
  json events = json::array();
  for (const std::string& part : parts) {
    for (json& e : json::parse(part)) events.push_back(std::move(e));
  }
  write_text_file(trace_file, json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n", "trace");
  std::vector<TimelineSpan> spans;
  std::vector<TimelineLane> lanes;
  split_for_timeline(events, spans, lanes);
  const Timeline timeline = draw_timeline(spans, lanes);
  const std::string svg_file = timeline_file(trace_file);
  write_svg_file(svg_file, timeline.svg);
  return "trace: " + trace_file + " (open it in ui.perfetto.dev or chrome://tracing); timeline: " + svg_file + ", " +
         overlap_summary(timeline);
}

}  // namespace dpt::report
