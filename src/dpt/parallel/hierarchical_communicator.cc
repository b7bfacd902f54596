#include "dpt/parallel/hierarchical_communicator.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "dpt/core/trace.h"

namespace dpt::parallel {

HierarchicalCommunicator::HierarchicalCommunicator(std::shared_ptr<Communicator> within,
                                                   std::shared_ptr<Communicator> between, int process)
    : within_(std::move(within)),
      between_(std::move(between)),
      process_(process),
      sends_(within_->size(), nullptr),
      receives_(within_->size(), nullptr) {
  if (process < 0 || process >= between_->size()) {
    throw std::invalid_argument("HierarchicalCommunicator: process " + std::to_string(process) + " of " +
                                std::to_string(between_->size()));
  }
}

std::string HierarchicalCommunicator::name() const {
  return between_->name() + " between processes, " + within_->name() + " within each";
}

int HierarchicalCommunicator::local(int rank) const {
  const int device = rank - process_ * within_->size();
  if (device < 0 || device >= within_->size()) {
    throw std::invalid_argument("HierarchicalCommunicator: rank " + std::to_string(rank) + " is not a device of process " +
                                std::to_string(process_));
  }
  return device;
}

template <typename Step>
void HierarchicalCommunicator::on_device0(int device, Step&& network) {
  if (device != 0) return;
  try {
    const trace::Span span(trace::Phase::between_processes);
    network();
  } catch (const std::exception& e) {
    within_->abort(std::string("between the processes: ") + e.what());
    throw;
  }
}

void HierarchicalCommunicator::allreduce(int rank, void* data, size_t count, DType type, ReduceOp op) {
  const int device = local(rank);
  {
    const trace::Span span(trace::Phase::within_process);
    within_->allreduce(device, data, count, type, op);
  }
  on_device0(device, [&] { between_->allreduce(process_, data, count, type, op); });
  within_->broadcast(device, data, count, type, 0);
}

void HierarchicalCommunicator::allreduce_compressed(int rank, float* data, size_t count, Compression compression) {
  const int device = local(rank);
  {
    const trace::Span span(trace::Phase::within_process);
    within_->allreduce(device, data, count, DType::f32, ReduceOp::sum);
  }
  on_device0(device, [&] { between_->allreduce_compressed(process_, data, count, compression); });
  within_->broadcast(device, data, count, DType::f32, 0);
}

void HierarchicalCommunicator::broadcast(int rank, void* data, size_t count, DType type, int root) {
  const int device = local(rank);
  const int devices = within_->size();
  const int root_process = root / devices;
  // The root's process first gets the root's buffer on every device; then each process's
  // device 0 takes part between the processes; then the others pass it on within.
  if (process_ == root_process) within_->broadcast(device, data, count, type, root % devices);
  on_device0(device, [&] { between_->broadcast(process_, data, count, type, root_process); });
  if (process_ != root_process) within_->broadcast(device, data, count, type, 0);
}

void HierarchicalCommunicator::barrier(int rank) {
  const int device = local(rank);
  within_->barrier(device);
  on_device0(device, [&] { between_->barrier(process_); });
  within_->barrier(device);
}

void HierarchicalCommunicator::alltoall(int rank, const std::vector<Block>& send, const std::vector<Block>& receive,
                                        DType type) {
  const int device = local(rank);
  try {
    check_alltoall_blocks(send, receive, size(), rank);
  } catch (const std::invalid_argument& e) {
    within_->abort(e.what());  // nobody has published yet: the others wait in the first barrier
    throw;
  }
  // Every device waits within the process while device 0 moves the blocks (its moves
  // between the processes nest inside).
  const trace::Span span(trace::Phase::within_process);
  sends_[device] = &send;
  receives_[device] = &receive;
  within_->barrier(device);  // every device's blocks are published
  if (device == 0) {
    alltoall_error_.clear();
    try {
      move_blocks(type);
    } catch (const CollectiveAborted& e) {
      within_->abort(std::string("between the processes: ") + e.what());
      throw;
    } catch (const std::exception& e) {
      alltoall_error_ = e.what();  // every device throws it after the barrier
    }
  }
  within_->barrier(device);  // device 0 has moved every block; the send blocks may go
  if (!alltoall_error_.empty()) throw std::invalid_argument(alltoall_error_);
}

void HierarchicalCommunicator::move_blocks(DType type) {
  const int devices = within_->size(), processes = between_->size();
  const size_t element = dtype_size(type);
  const auto block = [&](const std::vector<const std::vector<Block>*>& blocks, int device, int process, int peer) {
    return (*blocks[device])[process * devices + peer];
  };
  // Within this process: straight copies.
  for (int from = 0; from < devices; ++from) {
    for (int to = 0; to < devices; ++to) {
      const Block s = block(sends_, from, process_, to), r = block(receives_, to, process_, from);
      if (s.count != r.count) {
        throw std::invalid_argument("alltoall: rank " + std::to_string(process_ * devices + from) + " sends " +
                                    std::to_string(s.count) + " elements to rank " +
                                    std::to_string(process_ * devices + to) + ", which expects " +
                                    std::to_string(r.count));
      }
      if (s.count > 0) std::memcpy(r.data, s.data, s.count * element);
    }
  }
  // Between processes: one block per pair of processes, holding the devices' blocks in
  // (sending device, receiving device) order, which both ends know.
  std::vector<std::vector<std::byte>> out(processes), in(processes);
  std::vector<Block> send(processes), receive(processes);
  const trace::Span span(trace::Phase::between_processes);
  for (int q = 0; q < processes; ++q) {
    if (q == process_) continue;
    size_t incoming = 0;
    for (int from = 0; from < devices; ++from) {
      for (int to = 0; to < devices; ++to) {
        const Block s = block(sends_, from, q, to);
        const auto* bytes = static_cast<const std::byte*>(s.data);
        if (s.count > 0) out[q].insert(out[q].end(), bytes, bytes + s.count * element);
        incoming += block(receives_, to, q, from).count;  // q's device `from` to our `to`
      }
    }
    in[q].resize(incoming * element);
    send[q] = {out[q].data(), out[q].size() / element};
    receive[q] = {in[q].data(), incoming};
  }
  between_->alltoall(process_, send, receive, type);
  for (int q = 0; q < processes; ++q) {
    size_t offset = 0;
    for (int from = 0; from < devices && q != process_; ++from) {
      for (int to = 0; to < devices; ++to) {
        const Block r = block(receives_, to, q, from);
        if (r.count > 0) std::memcpy(r.data, in[q].data() + offset, r.count * element);
        offset += r.count * element;
      }
    }
  }
}

void HierarchicalCommunicator::abort(const std::string& reason) {
  within_->abort(reason);
  between_->abort(reason);
}

size_t HierarchicalCommunicator::bytes_received(int rank) const {
  const int device = local(rank);
  return within_->bytes_received(device) + (device == 0 ? between_->bytes_received(process_) : 0);
}

size_t HierarchicalCommunicator::bytes_between_processes(int rank) const {
  return local(rank) == 0 ? between_->bytes_received(process_) : 0;
}

}  // namespace dpt::parallel
