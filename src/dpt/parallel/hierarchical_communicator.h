// Several devices per process in a multi-process job: the job's ranks are processes x local
// devices (global rank = process * devices + device), and each collective runs in two
// levels, as Horovod's hierarchical allreduce does:
//   1. within the process: the devices' buffers summed by the in-process communicator
//      (memory copies between threads);
//   2. between the processes: one thread per process (its device 0's) runs the collective
//      of the process communicator (MPI: the network) on that sum;
//   3. within the process again: the result broadcast from device 0 to the others.
// Only one buffer per process crosses the network, so P processes of D devices send what
// P single-device processes would, not what P x D would.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "dpt/parallel/communicator.h"

namespace dpt::parallel {

class HierarchicalCommunicator final : public Communicator {
 public:
  using Communicator::allreduce;
  using Communicator::broadcast;

  // `within`: one rank per local device; `between`: one rank per process, this one being
  // `process`.
  HierarchicalCommunicator(std::shared_ptr<Communicator> within, std::shared_ptr<Communicator> between, int process);

  int size() const override { return within_->size() * between_->size(); }
  std::string name() const override;
  void allreduce(int rank, void* data, size_t count, DType type, ReduceOp op) override;
  // The sum within the process in float; between the processes as `compression` says.
  void allreduce_compressed(int rank, float* data, size_t count, Compression compression) override;
  void broadcast(int rank, void* data, size_t count, DType type, int root) override;
  // Gathered at device 0, which sends one block per process pair between the processes.
  void alltoall(int rank, const std::vector<Block>& send, const std::vector<Block>& receive, DType type) override;
  void barrier(int rank) override;
  void abort(const std::string& reason) override;
  // Both levels: this device's copies within the process, plus (device 0) the network's.
  size_t bytes_received(int rank) const override;

  // The network's share of bytes_received: what `rank`'s process has read from the other
  // processes (counted at its device 0).
  size_t bytes_between_processes(int rank) const;
  int devices_per_process() const { return within_->size(); }

 private:
  int local(int rank) const;  // the device of global `rank`, which must be this process's
  // Runs `network` (the between-process step) on device 0 only; a failure there aborts the
  // in-process level too, so that the other devices never wait for a result that won't come.
  template <typename Step>
  void on_device0(int device, Step&& network);
  // alltoall's work, on device 0 once every device has published its blocks.
  void move_blocks(DType type);

  std::shared_ptr<Communicator> within_, between_;
  int process_;
  // alltoall's blocks, published by each device for device 0 to move.
  std::vector<const std::vector<Block>*> sends_, receives_;
  std::string alltoall_error_;  // written by device 0 between two barriers
};

}  // namespace dpt::parallel
