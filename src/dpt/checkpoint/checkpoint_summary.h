// What `dptrain checkpoint-info FILE` prints: where the run stood, what it was trained
// with, and one digest per tensor group, so two checkpoints can be compared bit for bit
// (an interrupted-and-resumed run against an uninterrupted one) by eye or by a script.
#pragma once

#include <string>
#include <vector>

#include "dpt/checkpoint/checkpoint.h"

namespace dpt::checkpoint {

// 64-bit FNV-1a over the tensors' names, shapes and value bits, as 16 hex digits.
std::string digest(const std::vector<NamedTensor>& tensors);

// A human-readable summary, one fact per line ("params digest: 1f2e...").
std::string summary(const Checkpoint& checkpoint);

}  // namespace dpt::checkpoint
