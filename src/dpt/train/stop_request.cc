#include "dpt/train/stop_request.h"

#include <atomic>
#include <csignal>

namespace dpt::train {
namespace {

// Lock-free, so the handler may touch it (async-signal-safe).
std::atomic<int> requested_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int signal) {
  requested_signal.store(signal);
  std::signal(signal, SIG_DFL);  // the next one of this kind ends the process
}

}  // namespace

void install_stop_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

int stop_signal() { return requested_signal.load(); }

void request_stop(int signal) { requested_signal.store(signal); }

}  // namespace dpt::train
