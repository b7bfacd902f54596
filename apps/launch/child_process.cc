#include "launch/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace dpt::cli::launch {

namespace {

int status_of(int wait_status) {
  return WIFSIGNALED(wait_status) ? 128 + WTERMSIG(wait_status) : WEXITSTATUS(wait_status);
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, Output output) {
  const bool capture = output == Output::capture_stderr || output == Output::capture_all;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int pipe_fds[2] = {-1, -1};
  if (capture) {
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("cannot make a pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
    if (output == Output::capture_all) posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  } else if (output == Output::quiet) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);  // a group of its own, led by the child
  sigset_t none, defaults;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD}) sigaddset(&defaults, s);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  const int error = posix_spawnp(&pid_, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (capture) close(pipe_fds[1]);
  if (error != 0) {
    if (capture) close(pipe_fds[0]);
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(error));
  }
  if (capture) {
    output_fd_ = pipe_fds[0];
    fcntl(output_fd_, F_SETFL, fcntl(output_fd_, F_GETFL) | O_NONBLOCK);
  }
}

ChildProcess::~ChildProcess() {
  if (!status_) end(std::chrono::milliseconds(2000));
  if (output_fd_ >= 0) close(output_fd_);
}

std::optional<int> ChildProcess::poll() {
  if (status_) return status_;
  int wait_status = 0;
  if (waitpid(pid_, &wait_status, WNOHANG) == pid_) {
    status_ = status_of(wait_status);
    kill_group(SIGKILL);  // what it left behind in its group (an agent, a rank)
  }
  return status_;
}

void ChildProcess::take_output() {
  if (output_fd_ < 0) return;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(output_fd_, buffer, sizeof buffer);
    if (n <= 0) break;  // nothing more now (EAGAIN), or the end
    pending_.append(buffer, static_cast<size_t>(n));
  }
}

std::string ChildProcess::read_text() {
  take_output();
  std::string text;
  text.swap(pending_);
  return text;
}

std::vector<std::string> ChildProcess::read_lines() {
  std::vector<std::string> lines;
  take_output();
  for (size_t newline; (newline = pending_.find('\n')) != std::string::npos;) {
    lines.push_back(pending_.substr(0, newline));
    pending_.erase(0, newline + 1);
  }
  return lines;
}

void ChildProcess::signal(int signal) {
  if (!status_) ::kill(pid_, signal);
}

void ChildProcess::kill_group(int signal) { ::kill(-pid_, signal); }

int ChildProcess::end(std::chrono::milliseconds grace) {
  if (poll()) return *status_;
  kill_group(SIGTERM);
  kill_group(SIGCONT);  // a stopped process acts on SIGTERM only once it runs
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (!poll() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!status_) {
    kill_group(SIGKILL);
    int wait_status = 0;
    waitpid(pid_, &wait_status, 0);
    status_ = status_of(wait_status);
  }
  return *status_;
}

}  // namespace dpt::cli::launch
