// A program the launcher runs (mpirun, or a probe through mpirun) in a process group of its
// own: ending the group ends everything it started on this machine (mpirun, its
// remote-shell agents, local ranks), and with the agents gone the daemons mpirun started
// on other hosts lose their link to it and end their ranks.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dpt::cli::launch {

class ChildProcess {
 public:
  // Starts argv (argv[0] searched on PATH). Its stdout is ours; its stderr is read through
  // a pipe (read_lines) when `capture_stderr`, else ours too, or dropped when `quiet`.
  // Throws std::runtime_error when it cannot be started.
  ChildProcess(const std::vector<std::string>& argv, bool capture_stderr, bool quiet = false);
  ~ChildProcess();  // ends the group if it still runs
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The exit status once the child has ended (128 + N when ended by signal N), without
  // waiting.
  std::optional<int> poll();
  // The whole lines of stderr that arrived since the last call (never blocks).
  std::vector<std::string> read_lines();
  // Sends `signal` to the child alone (mpirun passes some on to the ranks).
  void signal(int signal);
  // SIGTERM to the whole group, SIGKILL after `grace` to what is left; returns the
  // child's status.
  int end(std::chrono::milliseconds grace);

 private:
  void kill_group(int signal);

  pid_t pid_ = -1;
  int stderr_fd_ = -1;
  std::string pending_;  // a partial stderr line
  std::optional<int> status_;
};

}  // namespace dpt::cli::launch
