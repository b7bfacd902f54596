#include "fault_injecting_communicator.h"

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

namespace dpt::testing_support {

namespace {

constexpr const char* kSpecForm =
    "RANK:CALL:MODE[,RANK:CALL:MODE...] with MODE exit, hang, throw, sigint, sigterm or stop and CALL >= 1 "
    "(e.g. 1:5:sigint,2:5:sigterm)";

constexpr std::array<std::pair<FaultMode, const char*>, 6> kModeNames{{{FaultMode::exit, "exit"},
                                                                      {FaultMode::hang, "hang"},
                                                                      {FaultMode::throw_error, "throw"},
                                                                      {FaultMode::sigint, "sigint"},
                                                                      {FaultMode::sigterm, "sigterm"},
                                                                      {FaultMode::stop, "stop"}}};

const char* mode_name(FaultMode mode) {
  for (const auto& [m, name] : kModeNames) {
    if (m == mode) return name;
  }
  return "?";
}

FaultMode parse_mode(const std::string& mode, const std::string& spec) {
  for (const auto& [m, name] : kModeNames) {
    if (mode == name) return m;
  }
  throw std::invalid_argument("DPT_TEST_MPI_FAULT must be " + std::string(kSpecForm) + ", got '" + spec +
                              "' (unknown mode '" + mode + "')");
}

Fault parse_one(const std::string& item, const std::string& spec) {
  Fault fault;
  char mode[16] = {};
  char tail = 0;
  if (std::sscanf(item.c_str(), "%d:%ld:%15[a-z]%c", &fault.rank, &fault.call, mode, &tail) != 3 || fault.rank < 0 ||
      fault.call < 1) {
    throw std::invalid_argument("DPT_TEST_MPI_FAULT must be " + std::string(kSpecForm) + ", got '" + spec + "'");
  }
  fault.mode = parse_mode(mode, spec);
  return fault;
}

// What the stderr line says the fault does.
const char* action(FaultMode mode) {
  switch (mode) {
    case FaultMode::exit: return "exiting without MPI_Finalize";
    case FaultMode::hang: return "hanging";
    case FaultMode::throw_error: return "throwing";
    case FaultMode::sigint: return "raising SIGINT";
    case FaultMode::sigterm: return "raising SIGTERM";
    case FaultMode::stop: return "stopping (SIGSTOP)";
  }
  return "?";
}

}  // namespace

std::vector<Fault> parse_fault_spec(const std::string& spec) {
  std::vector<Fault> faults;
  if (spec.empty()) return faults;
  std::stringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) faults.push_back(parse_one(item, spec));
  if (spec.back() == ',') parse_one("", spec);  // a trailing comma: refused like any other typo
  return faults;
}

std::vector<Fault> fault_spec_from_env() {
  const char* spec = std::getenv("DPT_TEST_MPI_FAULT");
  std::vector<Fault> faults = parse_fault_spec(spec ? spec : "");
  const char* once = std::getenv("DPT_TEST_MPI_FAULT_ONCE");
  if (!once || !*once) return faults;
  std::vector<Fault> due;
  for (Fault& fault : faults) {
    fault.marker = std::string(once) + "/fault-" + std::to_string(fault.rank) + "-" + std::to_string(fault.call) + "-" +
                   mode_name(fault.mode);
    if (!std::filesystem::exists(fault.marker)) due.push_back(fault);
  }
  return due;
}

FaultInjectingCommunicator::FaultInjectingCommunicator(std::shared_ptr<parallel::Communicator> inner,
                                                       std::vector<Fault> faults)
    : ForwardingCommunicator(std::move(inner)), faults_(std::move(faults)), calls_(static_cast<size_t>(size())) {}

void FaultInjectingCommunicator::allreduce(int rank, void* data, size_t count, DType type, parallel::ReduceOp op) {
  inject_if_due(rank);
  ForwardingCommunicator::allreduce(rank, data, count, type, op);
}

void FaultInjectingCommunicator::inject_if_due(int rank) {
  if (rank < 0 || rank >= size()) return;  // the wrapped communicator reports the bad rank
  const long call = ++calls_[static_cast<size_t>(rank)];
  for (const Fault& fault : faults_) {
    if (fault.rank != rank || fault.call != call) continue;
    // The wall-clock time lets the tests measure how long the others take to stop.
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::fprintf(stderr,
                 "dptrain: rank %d: DPT_TEST_MPI_FAULT: %s in allreduce %ld at unix time %.3f (a test of fault "
                 "handling)\n",
                 rank, action(fault.mode), call, now);
    std::fflush(stderr);
    if (!fault.marker.empty()) std::ofstream(fault.marker) << now << "\n";
    switch (fault.mode) {
      case FaultMode::exit: std::_Exit(3);
      case FaultMode::hang:
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      case FaultMode::throw_error:
        throw std::runtime_error("injected error (DPT_TEST_MPI_FAULT) in allreduce " + std::to_string(call));
      case FaultMode::sigint: std::raise(SIGINT); break;
      case FaultMode::sigterm: std::raise(SIGTERM); break;
      case FaultMode::stop: std::raise(SIGSTOP); break;
    }
  }
}

}  // namespace dpt::testing_support
