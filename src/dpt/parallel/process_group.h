// What the training loops ask of a multi-process job (ProcessGroup, in communicator.h)
// beyond the gradient allreduce.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/core/device.h"
#include "dpt/parallel/communicator.h"

namespace dpt::parallel {

// The stop request (a signal number, 0 for none) every process acts on after this step:
// a SIGINT/SIGTERM that reached any one process stops all of them after the same step, so
// none is left waiting in the next step's collectives. The rule: the largest signal number
// any process got (an i64 allreduce max), returned on EVERY process, the signalled ones
// included, so that all of them report and exit alike (SIGINT on one and SIGTERM on another
// in the same step: all stop by SIGTERM, 15 > 2). A collective: every rank calls it after
// every step. Without a job: `signal` itself.
int agree_on_stop(const ProcessGroup& group, int signal);

// Every rank's `digest` (of its replica's state), indexed by rank, on every rank: an i64
// sum of vectors that are zero but at their own rank. A collective. Without a job:
// {digest}.
std::vector<uint64_t> gather_digests(const ProcessGroup& group, uint64_t digest);

// Rank `root`'s `text` on every rank (its length as one i64 broadcast, then its bytes). A
// collective; the other ranks' `text` is ignored. Without a job: `text`.
std::string broadcast_string(const ProcessGroup& group, const std::string& text, int root);

// Every rank's `text`, indexed by rank, on every rank (an allgather of bytes: the lengths
// as one i64 sum, then each rank's bytes broadcast from it, as broadcast_string). A collective. Without a job:
// {text}.
std::vector<std::string> gather_strings(const ProcessGroup& group, const std::string& text);

// Names for the devices of the whole job: this process's devices ("cpu:0", "cpu:1"), or in
// a multi-process job those of every rank ("rank 0 cpu:0", "rank 0 cpu:1", "rank 1 cpu:0",
// ...; every process runs the devices this one has).
std::vector<std::string> device_names(const std::vector<Device>& devices, const ProcessGroup& group);

}  // namespace dpt::parallel
