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
  enum class Output {
    ours,            // its stdout and stderr are ours
    capture_stderr,  // its stdout is ours; its stderr is read through a pipe (read_lines, read_text)
    capture_all,     // its stdout and stderr together through the pipe (a probe: what mpirun says)
    quiet,           // its stdout and stderr dropped (/dev/null)
  };
  // Starts argv (argv[0] searched on PATH), its output as `output` says. Throws
  // std::runtime_error when it cannot be started.
  ChildProcess(const std::vector<std::string>& argv, Output output);
  ~ChildProcess();  // ends the group if it still runs
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The exit status once the child has ended (128 + N when ended by signal N), without
  // waiting.
  std::optional<int> poll();
  // The whole lines of the captured output that arrived since the last call (never blocks).
  std::vector<std::string> read_lines();
  // All the captured output that arrived since the last call, partial lines included (never
  // blocks; not mixed with read_lines).
  std::string read_text();
  // Sends `signal` to the child alone (mpirun passes some on to the ranks).
  void signal(int signal);
  // SIGTERM to the whole group, SIGKILL after `grace` to what is left; returns the
  // child's status.
  int end(std::chrono::milliseconds grace);

 private:
  void kill_group(int signal);
  void take_output();  // what the pipe holds now, onto pending_

  pid_t pid_ = -1;
  int output_fd_ = -1;  // the read end of the capture pipe
  std::string pending_;  // captured output not yet returned (read_lines: a partial line)
  std::optional<int> status_;
};

}  // namespace dpt::cli::launch
