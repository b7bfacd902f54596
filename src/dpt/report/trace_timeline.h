// The picture --trace draws next to its JSON: a few steps of a run, one lane per device,
// each lane with a compute row (forward, backward, update) above a communication row
// (allreduce, bucket allreduces, buffers, tree sums), and each process's host row (data
// loading, the divergence guard) on top; dashed lines where steps begin. Communication
// drawn under a compute bar ran while the device computed: the overlap buckets buy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dpt::report {

struct TimelineSpan {
  std::string name;      // trace::phase_name
  std::string category;  // trace::category_name: host | compute | communication
  int process = 0;       // the MPI rank (0 without MPI)
  int lane = 0;          // trace lane: 0 host, 2i + 1 device i, 2i + 2 its communication thread
  double begin_us = 0;
  double end_us = 0;
  int64_t arg = -1;      // iteration: the step number
};

struct TimelineLane {
  int process = 0;
  int lane = 0;
  std::string name;  // "cpu:0", "cpu:0 allreduce", "host"
};

// How much of each device's communication ran while it computed, over a window.
struct DeviceOverlap {
  std::string device;           // "rank 1 cpu:0" or "cpu:0"
  double communication_us = 0;  // time in communication spans
  double overlapped_us = 0;     // of it, while a compute span of the same device ran
};

struct Timeline {
  std::string svg;
  int first_step = 0, last_step = 0;  // the steps drawn (their iteration args)
  std::vector<DeviceOverlap> overlap;
};

// Draws up to `steps` iterations of process 0, skipping the first `skip` (warm-up:
// primitives created, buffers allocated) when the run has enough of them.
Timeline draw_timeline(const std::vector<TimelineSpan>& spans, const std::vector<TimelineLane>& lanes, int skip = 2,
                       int steps = 3);

}  // namespace dpt::report
