// Summing gradients across devices.
#pragma once

#include <vector>

#include "dpt/core/tensor.h"
#include "dpt/parallel/communicator.h"

namespace dpt::parallel {

// The lesson's allreduce, for one tensor per device held by one caller: afterwards every
// tensor holds the elementwise sum (summed onto the first, then copied back).
void allreduce(const std::vector<Tensor>& data);

// `tensors` (all on one device) one after another in `flat` (resized to their total size)
// on the host, and back (flat * scale): the device's backend packs and unpacks, and a GPU's
// flat buffer crosses to the host in one copy each way. For sums made on the host (a host
// communicator, --deterministic's chunk tree).
void pack_to_host(const std::vector<Tensor>& tensors, std::vector<float>& flat);
// Their total number of elements: the size of that buffer.
size_t total_values(const std::vector<Tensor>& tensors);
void unpack_from_host(const std::vector<float>& flat, const std::vector<Tensor>& tensors, float scale);

// The gradients of `params`, a zero one created for a parameter without one, so that every
// rank packs the same buffer size.
std::vector<Tensor> gradients_of(const std::vector<Tensor>& params);

// Sums `tensors` elementwise over all ranks with `comm` (the values travelling as
// `compression` says: Communicator::allreduce_compressed) and multiplies the sums by `scale`:
// the tensors are packed into one flat buffer on their device, so a whole model costs one
// collective instead of one per tensor. `flat_buffer` is the host copy of that buffer when
// GPU tensors meet a host backend (kept by the caller, so its memory is reused).
void allreduce_tensors(Communicator& comm, int rank, const std::vector<Tensor>& tensors,
                       std::vector<float>& flat_buffer, float scale = 1.0f,
                       Compression compression = Compression::none);

// Every rank's `tensors` take rank `root`'s values, in one broadcast of the packed buffer
// over a host communicator (`flat`, as in allreduce_tensors, holds the host copy): how the
// processes of a job start from the same parameters, on CPUs or GPUs.
void broadcast_tensors(Communicator& comm, int rank, const std::vector<Tensor>& tensors, std::vector<float>& flat,
                       int root);

// What each device's worker calls after its backward(): allreduce_tensors over the
// gradients of `params`. A parameter without a gradient gets a zero one first, so every
// rank passes the same buffer size.
void allreduce_gradients(Communicator& comm, int rank, const std::vector<Tensor>& params,
                         std::vector<float>& flat_buffer, float scale = 1.0f,
                         Compression compression = Compression::none);

// ZeRO's form of allreduce_gradients: only rank `rank`'s slice of the flat gradient
// (sharded_collectives.h) ends as the sum over the ranks times `scale`; the rest of each
// gradient holds this rank's own values times `scale`. Host memory only.
void reduce_scatter_gradients(Communicator& comm, int rank, const std::vector<Tensor>& params,
                              std::vector<float>& flat_buffer, float scale = 1.0f,
                              Compression compression = Compression::none);

}  // namespace dpt::parallel
