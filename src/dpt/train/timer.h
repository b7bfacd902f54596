// Wall-clock timing of epochs, as the lesson's d2l.Timer: start/stop, sum and average.
#pragma once

#include <chrono>
#include <vector>

namespace dpt::train {

class Timer {
 public:
  void start() { started_ = Clock::now(); }
  // Records and returns the seconds since start().
  double stop() {
    times_.push_back(std::chrono::duration<double>(Clock::now() - started_).count());
    return times_.back();
  }
  // Seconds since start(), without recording them.
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - started_).count(); }
  double sum() const {
    double total = 0;
    for (double t : times_) total += t;
    return total;
  }
  double avg() const { return times_.empty() ? 0.0 : sum() / static_cast<double>(times_.size()); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point started_ = Clock::now();
  std::vector<double> times_;
};

}  // namespace dpt::train
