#include "launch/launcher.h"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "dpt/checkpoint/checkpoint_dir.h"
#include "dpt/core/text.h"
#include "dpt/checkpoint/group_checkpoints.h"
#include "launch/child_process.h"

namespace dpt::cli::launch {

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> launcher_signal{0};
extern "C" void on_launcher_signal(int signal) { launcher_signal.store(signal); }

Clock::duration seconds(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

std::string format_seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

bool has_flag(const std::vector<std::string>& args, const std::string& flag) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) { return a == flag || a.rfind(flag + "=", 0) == 0; });
}

// A directory of the launcher's own (the hostfiles it writes for mpirun), removed at the end.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dptrain-launch-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot make a directory in " + pattern);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::filesystem::path write_hostfile(const std::filesystem::path& file, const std::vector<Host>& hosts) {
  std::ofstream(file) << hostfile_text(hosts);
  return file;
}

std::vector<std::string> mpirun_argv(const LaunchSettings& settings, const std::filesystem::path& hostfile, int processes,
                                     const std::vector<std::string>& program) {
  std::vector<std::string> argv{settings.mpirun, "--hostfile", hostfile.string(), "-np", std::to_string(processes)};
  argv.insert(argv.end(), settings.mpirun_args.begin(), settings.mpirun_args.end());
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

// The line of a program's output that says what happened: the first that is not blank or
// a rule ("-----", Open MPI's frame around its messages), trimmed, its control bytes
// escaped, cut at 200 characters; empty when there is none.
std::string first_meaningful_line(const std::string& output) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
    while (!line.empty() && space(line.back())) line.pop_back();
    line.erase(line.begin(), std::find_if_not(line.begin(), line.end(), space));
    if (line.find_first_not_of("-=*_") == std::string::npos) continue;  // blank, or a rule
    if (line.size() > 200) line = line.substr(0, 200) + "...";
    return printable(line);
  }
  return "";
}

// Probes of hosts, all at once: `mpirun -np 1 true` on each needs what a run needs (the
// remote shell, the daemon and its connection back to mpirun), and must end within the
// probe timeout. Polled, so that the launcher watches its job meanwhile. What mpirun
// prints is kept, to say why a host did not answer. A probe that fails at once is tried
// once more within the timeout: mpiruns started together share Open MPI's session
// directory, and one that exits early may remove it while another creates its own ("A
// call to mkdir was unable to create the desired directory").
class Probes {
 public:
  // A host whose probe failed, and why: "no answer to mpirun within 10 s" (it ran out of
  // time), or "mpirun refused: LINE" (it ended with an error, LINE the first it printed).
  struct Failure {
    Host host;
    std::string reason;
  };

  // `keep_output`: what mpirun prints is read, for failures(); otherwise it is dropped, as
  // the probes that look for hosts coming back do (mpirun's output through a pipe there
  // delayed a host's return past the end of the job in tests/multihost/launch.sh).
  Probes(const LaunchSettings& settings, const std::filesystem::path& dir, const std::vector<Host>& hosts,
         bool keep_output)
      : timeout_(settings.probe_timeout), deadline_(Clock::now() + seconds(settings.probe_timeout)) {
    for (const Host& host : hosts) {
      const auto file = write_hostfile(dir / ("probe-" + host.name), {{host.name, 1}});
      Probe probe;
      probe.host = host;
      probe.argv = mpirun_argv(settings, file, 1, {"true"});
      probe.mode = keep_output ? ChildProcess::Output::capture_all : ChildProcess::Output::quiet;
      probe.child = std::make_unique<ChildProcess>(probe.argv, probe.mode);
      probes_.push_back(std::move(probe));
    }
  }
  // Whether every probe has ended (those past the deadline are ended here).
  bool done() {
    bool all = true;
    for (Probe& probe : probes_) {
      take_output(probe);  // a pipe that fills would stop mpirun
      if (const std::optional<int> status = probe.child->poll()) {
        take_output(probe);  // what it printed last
        if (*status != 0 && !probe.retried && Clock::now() < deadline_) {
          probe.retried = true;
          probe.output.clear();
          probe.child = std::make_unique<ChildProcess>(probe.argv, probe.mode);
          all = false;
        }
        continue;
      }
      if (Clock::now() < deadline_) {
        all = false;
      } else {
        probe.child->end(std::chrono::milliseconds(1000));
        probe.timed_out = true;
      }
    }
    return all;
  }
  // The hosts whose probe succeeded in time (once done()).
  std::vector<Host> answered() {
    std::vector<Host> hosts;
    for (Probe& probe : probes_) {
      if (!probe.timed_out && probe.child->poll() == 0) hosts.push_back(probe.host);
    }
    return hosts;
  }
  // The others, with why (once done()).
  std::vector<Failure> failures() {
    std::vector<Failure> failed;
    for (Probe& probe : probes_) {
      if (probe.timed_out) {
        failed.push_back({probe.host, "no answer to mpirun within " + format_seconds(timeout_)});
      } else if (const int status = probe.child->poll().value_or(0); status != 0) {
        const std::string line = first_meaningful_line(probe.output);
        failed.push_back({probe.host, line.empty() ? "mpirun refused with status " + std::to_string(status) +
                                                         ", printing nothing"
                                                   : "mpirun refused: " + line});
      }
    }
    return failed;
  }
  // Whether what a probe's mpirun printed holds `text`.
  bool said(const std::string& text) const {
    return std::any_of(probes_.begin(), probes_.end(),
                       [&](const Probe& probe) { return probe.output.find(text) != std::string::npos; });
  }

 private:
  struct Probe {
    Host host;
    std::vector<std::string> argv;
    ChildProcess::Output mode = ChildProcess::Output::quiet;
    std::unique_ptr<ChildProcess> child;
    bool retried = false;  // a probe that failed at once is run a second time
    bool timed_out = false;
    std::string output;  // what mpirun printed (its first 64 KiB)
  };
  static void take_output(Probe& probe) {
    constexpr size_t kept = size_t{64} << 10;
    const std::string text = probe.child->read_text();
    if (probe.output.size() < kept) probe.output.append(text, 0, kept - probe.output.size());
  }
  double timeout_;
  Clock::time_point deadline_;
  std::vector<Probe> probes_;
};

std::vector<std::string> names(const std::vector<Host>& hosts) {
  std::vector<std::string> list;
  for (const Host& host : hosts) list.push_back(host.name);
  return list;
}

// Each membership change: one line on stdout, and a JSON line in the events file beside
// --metrics (METRICS with the extension .launch.jsonl) when there is one.
class Events {
 public:
  explicit Events(const std::string& metrics_file) {
    if (metrics_file.empty()) return;
    path_ = std::filesystem::path(metrics_file).replace_extension(".launch.jsonl");
    std::ofstream out(path_, std::ios::app);
    if (!out) throw std::runtime_error("cannot write " + path_.string() + " (the launcher's events, beside --metrics)");
  }
  void write(const std::string& event, const std::string& line, const std::vector<Host>& hosts, int restarts,
             const std::string& cause = "", const std::string& resume_from = "") {
    std::printf("dptrain launch: %s\n", line.c_str());
    std::fflush(stdout);
    if (path_.empty()) return;
    nlohmann::ordered_json j;
    j["event"] = event;
    j["time"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    j["restarts"] = restarts;
    j["hosts"] = names(hosts);
    j["processes"] = total_slots(hosts);
    if (!cause.empty()) j["cause"] = cause;
    if (!resume_from.empty()) j["resume_from"] = resume_from;
    std::ofstream(path_, std::ios::app) << j.dump() << "\n";
  }

 private:
  std::filesystem::path path_;
};

struct Outcome {
  enum Kind { finished, failed, stopped, grow } kind = failed;
  int status = 0;
  std::string cause;
  std::vector<Host> joining;  // grow: the hosts that answered again
};

bool reports_failure(const std::string& line) {
  return line.find("dptrain: error:") != std::string::npos || line.find("mpirun noticed") != std::string::npos ||
         line.find("ORTE has lost communication") != std::string::npos ||
         line.find("ORTE was unable to reliably start") != std::string::npos;
}

class Launcher {
 public:
  Launcher(const LaunchSettings& settings, const train::JobConfig& job)
      : settings_(settings),
        job_(job),
        events_(job.metrics_file),
        self_(settings.program.empty() ? std::filesystem::read_symlink("/proc/self/exe")
                                       : std::filesystem::path(settings.program)) {}

  int run() {
    std::vector<Host> members = usable(read_hostfile(settings_.hostfile), "at the start");
    bool resume = false;  // the first run: the train flags as given
    events_.write("start", "starting on " + describe(members), members, 0);
    for (int restarts = 0;;) {
      if (const int s = launcher_signal.load(); s != 0) {  // arrived between runs: nothing to pass on
        events_.write("stopped", "stopped by signal " + std::to_string(s) + " between runs", members, restarts);
        return 128 + s;
      }
      const Outcome outcome = run_job(members, resume);
      switch (outcome.kind) {
        case Outcome::finished:
          events_.write("finished", "the job finished on " + describe(members) + " after " + std::to_string(restarts) +
                                        " restart" + (restarts == 1 ? "" : "s"), members, restarts);
          return 0;
        case Outcome::stopped:
          events_.write("stopped", "stopped by signal " + std::to_string(outcome.status - 128) + ", passed on to the job",
                        members, restarts);
          return outcome.status;
        case Outcome::grow:
          members.insert(members.end(), outcome.joining.begin(), outcome.joining.end());
          resume = true;
          {
            const std::string newest = newest_checkpoint();
            events_.write("grow", host_names(outcome.joining) + " answered again: restarting on " + describe(members) +
                                      resume_text(newest),
                          members, restarts, "", newest);
          }
          continue;
        case Outcome::failed:
          break;
      }
      if (restarts == settings_.max_restarts) {
        events_.write("gave_up", "giving up after " + std::to_string(restarts) + " restarts: " + outcome.cause, members,
                      restarts, outcome.cause);
        throw std::runtime_error("launch gave up after " + std::to_string(restarts) + " restart" +
                                 (restarts == 1 ? "" : "s") + " (--max-restarts): " + outcome.cause);
      }
      members = usable(read_hostfile(settings_.hostfile), "after the failure (" + outcome.cause + ")");
      ++restarts;
      resume = true;
      const std::string newest = newest_checkpoint();
      events_.write("restart", "the run failed: " + outcome.cause + "; restart " + std::to_string(restarts) + " of " +
                                   std::to_string(settings_.max_restarts) + " on " + describe(members) +
                                   resume_text(newest),
                    members, restarts, outcome.cause, newest);
    }
  }

 private:
  // The newest checkpoint file the job would resume from, as the launcher sees the
  // directory (a shared one, or {host} expanded with the launcher's host name); empty when
  // it sees none.
  std::string newest_checkpoint() const {
    const std::filesystem::path dir = checkpoint::expand_host(job_.checkpoint_dir);
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) return "";
    const std::vector<std::filesystem::path> files = checkpoint::list(dir);
    return files.empty() ? "" : files.back().filename().string();
  }
  std::string resume_text(const std::string& newest) const {
    if (!newest.empty()) return ", resuming from the newest intact checkpoint (" + newest + " or older)";
    return checkpoint::per_host(job_.checkpoint_dir)
               ? ", resuming from the newest checkpoint any host holds (from the start if none does)"
               : ", from the start (no checkpoint yet)";
  }

  // The hosts that answer a probe; throws naming the others and why when they are fewer
  // than --min-hosts.
  std::vector<Host> usable(const std::vector<Host>& hosts, const std::string& when) {
    Probes probes(settings_, dir_.path(), hosts, /*keep_output=*/true);
    while (!probes.done()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<Host> answered = probes.answered();
    if (static_cast<int>(answered.size()) >= settings_.min_hosts) return answered;
    // "h1, h2: why; h3: why", the hosts with the same reason together, in the hostfile's order.
    std::vector<std::pair<std::string, std::vector<Host>>> by_reason;
    for (const Probes::Failure& failure : probes.failures()) {
      auto same = std::find_if(by_reason.begin(), by_reason.end(),
                               [&](const auto& r) { return r.first == failure.reason; });
      if (same == by_reason.end()) same = by_reason.insert(by_reason.end(), {failure.reason, {}});
      same->second.push_back(failure.host);
    }
    std::string why;
    for (const auto& [reason, left_out] : by_reason) {
      why += (why.empty() ? "" : "; ") + host_names(left_out) + ": " + reason;
    }
    std::string message = "only " + std::to_string(answered.size()) + " of " + std::to_string(hosts.size()) +
                          " hosts in " + settings_.hostfile + " answer " + when + " (" + why + "); --min-hosts is " +
                          std::to_string(settings_.min_hosts);
    if (probes.said("allow-run-as-root")) {  // Open MPI's refusal to run as root
      message += "; mpirun runs as root only with --mpirun-args \"--allow-run-as-root\" (or OMPI_ALLOW_RUN_AS_ROOT=1 "
                 "and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the environment)";
    }
    throw std::runtime_error(message);
  }

  std::vector<std::string> train_argv(bool resume) const {
    std::vector<std::string> argv{self_.string(), "train"};
    const std::vector<std::string> flags = rank_train_flags(settings_.train_args);
    argv.insert(argv.end(), flags.begin(), flags.end());
    // A restart: from the newest checkpoint any host holds, or from the first step if the
    // run failed before its first.
    if (resume && !has_flag(settings_.train_args, "--resume") && !has_flag(settings_.train_args, "--resume-if-any"))
      argv.push_back("--resume-if-any");
    return argv;
  }

  Outcome run_job(const std::vector<Host>& members, bool resume) {
    const auto file = write_hostfile(dir_.path() / "hostfile", members);
    ChildProcess job(mpirun_argv(settings_, file, total_slots(members), train_argv(resume)),
                     ChildProcess::Output::capture_stderr);
    Outcome outcome;
    std::optional<Clock::time_point> error_deadline;
    int stop_signal = 0;
    bool stop_sent = false;
    Clock::time_point next_probe = Clock::now() + seconds(settings_.readmit_every);
    std::unique_ptr<Probes> readmission;  // probes of the hosts left out, in flight
    std::string first_exit;  // mpirun's "Process name: [[job,vpid],R]" and "Exit code: N" of a rank that exited
    const auto take_lines = [&] {
      for (const std::string& line : job.read_lines()) {
        std::fprintf(stderr, "%s\n", line.c_str());
        if (outcome.cause.empty() && reports_failure(line)) {
          outcome.cause = line;
          error_deadline = Clock::now() + seconds(settings_.error_grace);
        }
        if (const size_t at = line.find("Process name: [["); at != std::string::npos) {
          const size_t rank = line.rfind(',');
          if (rank != std::string::npos) first_exit = "rank " + line.substr(rank + 1, line.find(']', rank) - rank - 1);
        } else if (const size_t code = line.find("Exit code:"); code != std::string::npos && !first_exit.empty()) {
          first_exit += " exited with status " + std::to_string(std::atoi(line.c_str() + code + 10));
        }
      }
    };
    std::optional<int> status;
    while (!(status = job.poll())) {
      take_lines();
      if (const int s = launcher_signal.load(); s != 0 && !stop_sent) {
        stop_signal = s;
        stop_sent = true;
        job.signal(SIGTERM);  // mpirun passes it on: every rank stops after the same step, checkpointed
      }
      if (error_deadline && Clock::now() > *error_deadline) {
        status = job.end(std::chrono::milliseconds(3000));
        outcome.cause += " (mpirun went on waiting " + format_seconds(settings_.error_grace) + " after it: ended)";
        break;
      }
      if (!stop_sent && settings_.readmit_every > 0) {
        if (!readmission && Clock::now() > next_probe) readmission = probe_absent(members);
        if (readmission && readmission->done()) {
          outcome.joining = readmission->answered();
          readmission.reset();
          next_probe = Clock::now() + seconds(settings_.readmit_every);
          if (!outcome.joining.empty()) {
            stop_sent = true;
            job.signal(SIGTERM);  // every rank stops after the same step, checkpointed
          }
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    take_lines();
    outcome.status = *status;
    if (outcome.status == 0) outcome.kind = Outcome::finished;
    else if (stop_signal != 0) {
      outcome.kind = Outcome::stopped;
      outcome.status = 128 + stop_signal;
    } else if (!outcome.joining.empty()) {
      outcome.kind = Outcome::grow;
    } else if (outcome.cause.empty()) {
      outcome.cause = first_exit.find("exited") != std::string::npos
                          ? first_exit
                          : "mpirun exited with status " + std::to_string(outcome.status);
    }
    return outcome;
  }

  // Probes of the hosts of the hostfile (read again: hosts may have been added) outside
  // `members`; none when there are none.
  std::unique_ptr<Probes> probe_absent(const std::vector<Host>& members) {
    std::vector<Host> absent;
    try {
      absent = hosts_not_in(read_hostfile(settings_.hostfile), members);
    } catch (const std::runtime_error&) {
      return nullptr;  // being edited: next time
    }
    return absent.empty() ? nullptr : std::make_unique<Probes>(settings_, dir_.path(), absent, /*keep_output=*/false);
  }

  const LaunchSettings& settings_;
  const train::JobConfig& job_;
  Events events_;
  std::filesystem::path self_;
  ScratchDir dir_;
};

}  // namespace

std::vector<std::string> rank_train_flags(const std::vector<std::string>& train_args) {
  std::vector<std::string> flags = train_args;
  if (!has_flag(flags, "--dist")) flags.insert(flags.end(), {"--dist", "mpi"});
  return flags;
}

void check(const LaunchSettings& settings, const train::JobConfig& job) {
  if (job.checkpoint_dir.empty()) {
    throw std::runtime_error("launch needs --checkpoint-dir among the train flags: a restart resumes from its newest "
                             "checkpoint");
  }
  if (has_flag(settings.train_args, "--dist") && job.dist != "mpi") {
    throw std::runtime_error("launch runs the job with --dist mpi, got --dist " + job.dist);
  }
  if (settings.min_hosts < 1) throw std::runtime_error("--min-hosts must be at least 1, got " + std::to_string(settings.min_hosts));
  if (settings.max_restarts < 0) {
    throw std::runtime_error("--max-restarts must be >= 0, got " + std::to_string(settings.max_restarts));
  }
  if (!(settings.probe_timeout > 0)) throw std::runtime_error("--probe-timeout must be > 0 seconds");
  if (!(settings.error_grace >= 0)) throw std::runtime_error("--error-grace must be >= 0 seconds");
  if (!(settings.readmit_every >= 0)) throw std::runtime_error("--readmit-every must be >= 0 seconds");
}

int launch(const LaunchSettings& settings, const train::JobConfig& job) {
  check(settings, job);
  read_hostfile(settings.hostfile);  // a missing or bad file fails before anything starts
  struct sigaction action {};
  action.sa_handler = on_launcher_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  Launcher launcher(settings, job);
  return launcher.run();
}

}  // namespace dpt::cli::launch
