// Stopping on SIGINT (Ctrl-C) or SIGTERM (a scheduler's kill): the first signal only
// raises a flag that the training loop polls after every step, so the step finishes, a
// checkpoint is written and the program exits with a message. A second signal ends the
// process at once, for a user who does not want to wait.
#pragma once

namespace dpt::train {

// Installs the handlers for SIGINT and SIGTERM.
void install_stop_handlers();

// The signal that asked training to stop, or 0.
int stop_signal();

// For tests: ask for a stop as a signal would (0 clears the request).
void request_stop(int signal);

}  // namespace dpt::train
