#include "dpt/core/trace.h"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>

namespace dpt::trace {

namespace {

std::atomic<bool> on{false};
std::atomic<int64_t> origin_ns{0};

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct ThreadBuffer {
  int lane = host_lane;
  std::vector<Event> events;
};

// Owns every thread's buffer, so that events survive the threads that recorded them.
struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<ThreadBuffer>> buffers;
  std::map<int, std::string> names{{host_lane, "host"}};
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: threads may record during exit
  return *r;
}

ThreadBuffer& this_thread_buffer() {
  thread_local ThreadBuffer* buffer = [] {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    r.buffers.push_back(std::make_unique<ThreadBuffer>());
    return r.buffers.back().get();
  }();
  return *buffer;
}

}  // namespace

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::iteration: return "iteration";
    case Phase::data: return "data";
    case Phase::prefetch: return "prefetch";
    case Phase::step: return "step";
    case Phase::guard: return "guard";
    case Phase::update: return "update";
    case Phase::evaluate: return "evaluate";
    case Phase::checkpoint: return "checkpoint";
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::allreduce: return "allreduce";
    case Phase::bucket_allreduce: return "bucket allreduce";
    case Phase::buffers: return "buffers";
    case Phase::tree_sum: return "tree sum";
    case Phase::within_process: return "within process";
    case Phase::between_processes: return "between processes";
    case Phase::gather_parameters: return "gather parameters";
  }
  return "?";
}

Category phase_category(Phase phase) {
  switch (phase) {
    case Phase::forward:
    case Phase::backward:
    case Phase::update: return Category::compute;
    case Phase::allreduce:
    case Phase::bucket_allreduce:
    case Phase::buffers:
    case Phase::tree_sum:
    case Phase::within_process:
    case Phase::between_processes:
    case Phase::gather_parameters: return Category::communication;
    default: return Category::host;
  }
}

const char* category_name(Category category) {
  switch (category) {
    case Category::host: return "host";
    case Category::compute: return "compute";
    case Category::communication: return "communication";
  }
  return "?";
}

void enable() {
  set_origin();
  on.store(true, std::memory_order_relaxed);
}

bool enabled() { return on.load(std::memory_order_relaxed); }

void set_origin() { origin_ns.store(steady_ns(), std::memory_order_relaxed); }

void name_this_thread(int lane, std::string name) {
  this_thread_buffer().lane = lane;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.names[lane] = std::move(name);
}

std::vector<Event> take_events() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<Event> all;
  for (const auto& buffer : r.buffers) {
    all.insert(all.end(), buffer->events.begin(), buffer->events.end());
    buffer->events.clear();
  }
  return all;
}

std::vector<LaneName> lane_names() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<LaneName> names;
  for (const auto& [lane, name] : r.names) names.push_back({lane, name});
  return names;
}

Span::Span(Phase phase, int64_t arg) : phase_(phase), arg_(arg) {
  if (enabled()) begin_ns_ = steady_ns();
}

Span::~Span() {
  if (begin_ns_ < 0) return;
  const int64_t end = steady_ns();
  const int64_t origin = origin_ns.load(std::memory_order_relaxed);
  ThreadBuffer& buffer = this_thread_buffer();
  buffer.events.push_back({phase_, buffer.lane, arg_, begin_ns_ - origin, end - origin});
}

}  // namespace dpt::trace
