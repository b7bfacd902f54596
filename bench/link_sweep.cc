// Allreduce time against message size over MPI: dpt's own ring allreduce (MpiRuntime's
// communicator("ring"), the one `dptrain train --dist mpi` sums gradients with; not
// MPI_Allreduce), for float buffers of --min-bytes .. --max-bytes growing by --factor.
// Every size is timed --reps times after one untimed warm-up, each repetition starting
// after a barrier and timed on rank 0 from the barrier's end to the allreduce's end; fewer
// repetitions when one allreduce takes long (--budget seconds per size, at least 1).
// --gap-ms leaves the link idle before every timed repetition, as a training step does
// while it computes (shaped TCP links here run faster after an idle moment than under
// back-to-back transfers; bench/README.md).
// Rank 0 prints one line per size (median, min, max seconds, effective bus bandwidth) and,
// for bench/link_fit.sh, one JSON line per size on stdout, prefixed "JSON " (and into
// --json FILE when given):
//   JSON {"ranks":2,"bytes":1024,"reps":9,"median_s":...,"min_s":...,"max_s":...}
//
//   mpirun -np 2 build/bench/link_sweep [--min-bytes 1024] [--max-bytes 67108864] [--factor 4]
//          [--reps 9] [--budget 6] [--json FILE] [--descending] [--gap-ms 0]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dpt/parallel/mpi_communicator.h"

using namespace dpt;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Ring allreduce time against message size over MPI (dpt's MpiRuntime ring)"};
  int64_t min_bytes = 1024, max_bytes = int64_t{64} << 20;
  int factor = 4, reps = 9;
  bool descending = false;
  double budget = 6, timeout = 300, gap_ms = 0;
  std::string json_path;
  app.add_option("--min-bytes", min_bytes, "Smallest message (bytes, a multiple of 4)")->capture_default_str();
  app.add_option("--max-bytes", max_bytes, "Largest message (bytes)")->capture_default_str();
  app.add_option("--factor", factor, "Each size is the previous times this")->check(CLI::Range(2, 16))->capture_default_str();
  app.add_option("--reps", reps, "Timed repetitions per size (at most)")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--budget", budget, "Seconds per size: fewer repetitions for slow sizes (at least 1)")
      ->capture_default_str();
  app.add_option("--collective-timeout", timeout, "Deadline of each collective, seconds")->capture_default_str();
  app.add_option("--json", json_path, "Also write the JSON lines into this file (rank 0)");
  app.add_option("--gap-ms", gap_ms,
                 "Idle milliseconds before each timed allreduce (a training step leaves the link idle while it computes)")
      ->capture_default_str();
  app.add_flag("--descending", descending,
               "Largest size first (a shaped TCP link may run faster while fresh: measure it in its steady state)");
  CLI11_PARSE(app, argc, argv);

  parallel::MpiRuntime mpi;
  const int n = mpi.size(), rank = mpi.rank();
  auto comm = mpi.communicator("ring", timeout);
  std::FILE* json = nullptr;
  if (rank == 0 && !json_path.empty()) {
    json = std::fopen(json_path.c_str(), "w");
    if (!json) {
      std::fprintf(stderr, "link_sweep: cannot write %s\n", json_path.c_str());
      parallel::MpiRuntime::abort_job(1);
    }
  }
  if (rank == 0) {
    std::printf("link_sweep: %d ranks (rank 0 on %s), ring allreduce of float buffers %lld .. %lld bytes, "
                "up to %d repetitions (%.1f s per size)\n",
                n, mpi.host().c_str(), static_cast<long long>(min_bytes), static_cast<long long>(max_bytes), reps,
                budget);
    std::printf("%12s %5s %12s %12s %12s %14s\n", "bytes", "reps", "median_s", "min_s", "max_s", "busbw_Gbit/s");
    std::fflush(stdout);
  }
  std::vector<float> buffer(static_cast<size_t>(std::max<int64_t>(max_bytes, 4) / 4), 1.0f);
  std::vector<int64_t> sizes;
  for (int64_t bytes = std::max<int64_t>(min_bytes, 4); bytes <= max_bytes; bytes *= factor) sizes.push_back(bytes);
  if (descending) std::reverse(sizes.begin(), sizes.end());
  for (const int64_t bytes : sizes) {
    const size_t count = static_cast<size_t>(bytes / 4);
    // Warm-up (connections, pages), timed to choose the repetitions; rank 0 decides for all.
    comm->barrier(rank);
    auto start = std::chrono::steady_clock::now();
    comm->allreduce_sum(rank, buffer.data(), count);
    const double first = seconds_since(start);
    int64_t my_reps = std::clamp<int64_t>(static_cast<int64_t>(budget / std::max(first, 1e-9)), 1, reps);
    comm->broadcast(rank, &my_reps, 1, 0);
    std::vector<double> times;
    for (int64_t r = 0; r < my_reps; ++r) {
      if (gap_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(gap_ms));
      comm->barrier(rank);
      start = std::chrono::steady_clock::now();
      comm->allreduce_sum(rank, buffer.data(), count);
      times.push_back(seconds_since(start));
    }
    if (rank != 0) continue;
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    const size_t m = sorted.size();
    const double median = m % 2 ? sorted[m / 2] : 0.5 * (sorted[m / 2 - 1] + sorted[m / 2]);
    // Bus bandwidth as NCCL's tests define it: 2 (N-1)/N bytes per rank over the time.
    const double busbw = n > 1 ? 2.0 * (n - 1) / n * static_cast<double>(bytes) * 8 / median / 1e9 : 0.0;
    std::printf("%12lld %5zu %12.6g %12.6g %12.6g %14.4g\n", static_cast<long long>(bytes), m, median, sorted.front(),
                sorted.back(), busbw);
    char line[512];
    std::snprintf(line, sizeof line,
                  "{\"ranks\":%d,\"bytes\":%lld,\"reps\":%zu,\"median_s\":%.9g,\"min_s\":%.9g,\"max_s\":%.9g}", n,
                  static_cast<long long>(bytes), m, median, sorted.front(), sorted.back());
    std::printf("JSON %s\n", line);
    std::fflush(stdout);
    if (json) {
      std::fprintf(json, "%s\n", line);
      std::fflush(json);
    }
  }
  if (json) std::fclose(json);
  return 0;
}
