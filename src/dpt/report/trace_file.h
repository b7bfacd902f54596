// `--trace FILE.json`: the spans core/trace.h recorded, from every process of the job, as
// one Chrome trace (the JSON "Trace Event Format" that chrome://tracing and
// ui.perfetto.dev open): a process per MPI rank, a thread per lane (the host's loop, each
// device's worker, each device's communication thread). Next to it, an SVG timeline of a
// few steps (trace_timeline.h) and a one-line summary of how much communication overlapped
// compute.
#pragma once

#include <string>

#include "dpt/parallel/communicator.h"

namespace dpt::report {

// Starts recording (trace::enable): call before the model's devices start.
void start_trace();

// FILE.json -> FILE.timeline.svg (any other name: NAME.timeline.svg).
std::string timeline_file(const std::string& trace_file);

// Takes this process's events and writes the job's trace and timeline; returns the summary
// line (what it wrote, the overlap). A collective in a multi-process job: every rank calls
// it, rank 0 writes the files and the others return an empty line.
std::string write_trace(const std::string& trace_file, const parallel::ProcessGroup& group);

}  // namespace dpt::report
