// Spans of a run's work for `--trace` (report/trace_file.h writes them as a Chrome/Perfetto
// trace): what each thread did and when. A thread names its lane once (the host's loop,
// a device's worker, a device's communication thread); a Span then records its phase,
// lane and begin/end time when it goes out of scope. Off unless enable() was called, and
// then one relaxed atomic load per span: the engine can keep its spans in place.
//
// Every thread appends to a buffer of its own (no lock per span); buffers outlive their
// threads, so the events can be taken after the pools are gone. take_events() must not
// race with recording: call it when the run's threads are idle or joined.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dpt::trace {

// What a span measures. The category decides where the timeline draws it.
enum class Phase {
  iteration,         // host: one update, from its first batch to its update
  data,              // host: waiting for the next batch (or cutting it, without prefetch)
  prefetch,          // data lane: filling a batch ahead of the step (decode, augment)
  step,              // host: scatter, every device's forward/backward/allreduce, the figures
  guard,             // host: the divergence check of the step's loss and gradients
  update,            // device: the optimizer step on its replica
  evaluate,          // host: the test-set evaluation after an epoch
  checkpoint,        // host: writing a checkpoint
  forward,           // device
  backward,          // device
  allreduce,         // device: the gradients, one flat buffer after backward
  bucket_allreduce,  // device's communication thread: one bucket during backward (arg: bucket)
  buffers,           // device: averaging the buffers (BatchNorm running statistics)
  tree_sum,          // device: deterministic mode's exchange of tree nodes and fixed-order sum
  within_process,    // device: a collective's level among the devices of one process
  between_processes, // device 0: a collective's level among the processes (the network)
  gather_parameters, // device: ZeRO-1's all-gather of the updated slices, inside its update
};
enum class Category { host, compute, communication };
const char* phase_name(Phase phase);
Category phase_category(Phase phase);
const char* category_name(Category category);

// Lane numbers: the host loop is 0, device i's worker 2i + 1, its communication thread 2i + 2;
// the loader's prefetch thread -1 (drawn above the host).
constexpr int data_lane = -1;
constexpr int host_lane = 0;
constexpr int device_lane(int device) { return 2 * device + 1; }
constexpr int communication_lane(int device) { return 2 * device + 2; }

struct Event {
  Phase phase;
  int lane;
  int64_t arg;       // -1: none; bucket_allreduce: the bucket
  int64_t begin_ns;  // since the origin (set_origin)
  int64_t end_ns;
};

struct LaneName {
  int lane;
  std::string name;
};

void enable();
bool enabled();
// Time zero of this process's events: the job calls it right after a collective, so that
// the processes of a multi-process job start their clocks together.
void set_origin();
// Names the calling thread's lane; a thread that never names one records on host_lane.
void name_this_thread(int lane, std::string name);

// Every thread's events, in no particular order, and the lanes' names. Clears them.
std::vector<Event> take_events();
std::vector<LaneName> lane_names();

class Span {
 public:
  explicit Span(Phase phase, int64_t arg = -1);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  // Records nothing after all (a loop's iteration that found no more work).
  void discard() { begin_ns_ = -1; }

 private:
  Phase phase_;
  int64_t arg_;
  int64_t begin_ns_ = -1;  // -1: tracing was off when the span began
};

}  // namespace dpt::trace
