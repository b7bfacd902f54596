#include "dpt/checkpoint/checkpoint_summary.h"

#include <cstdio>
#include <cstring>

namespace dpt::checkpoint {
namespace {

class Fnv1a {
 public:
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) hash_ = (hash_ ^ p[i]) * 0x100000001b3ULL;
  }
  std::string hex() const {
    char out[17];
    std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(hash_));
    return out;
  }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

std::string format(const char* fmt, double value) {
  char out[64];
  std::snprintf(out, sizeof(out), fmt, value);
  return out;
}

}  // namespace

std::string digest(const std::vector<NamedTensor>& tensors) {
  Fnv1a h;
  for (const NamedTensor& t : tensors) {
    h.add(t.name.data(), t.name.size());
    h.add(t.shape.data(), t.shape.size() * sizeof(int64_t));
    h.add(t.values.data(), t.values.size() * sizeof(float));
  }
  return h.hex();
}

std::string summary(const Checkpoint& c) {
  std::string devices;
  for (const std::string& d : c.devices) devices += (devices.empty() ? "" : ", ") + d;
  int64_t values = 0;
  for (const NamedTensor& t : c.params) values += static_cast<int64_t>(t.values.size());
  std::string out;
  out += "model: " + c.model + "\n";
  out += "run: " + (c.run_id.empty() ? std::string("(not recorded)") : c.run_id) + "\n";
  out += "written on: [" + devices + "]\n";
  out += "seed: " + std::to_string(c.seed) + ", batch size: " + std::to_string(c.batch_size) +
         ", training examples: " + std::to_string(c.train_examples) + "\n";
  out += "lr schedule: " + c.lr_schedule + ", warmup epochs: " + std::to_string(c.warmup_epochs) +
         ", lr scaling: " + c.lr_scaling + ", micro-batches per step: " + std::to_string(c.accumulate) + "\n";
  if (!c.settings.empty()) {
    out += "settings:";
    for (const auto& [name, value] : c.settings) out += " " + name + " " + value + (&value == &c.settings.back().second ? "" : ",");
    out += "\n";
  }
  out += "position: epoch " + std::to_string(c.position.epoch + 1) + ", batch " +
         std::to_string(c.position.batch_offset) + " (" + std::to_string(c.position.global_step) + " steps taken)\n";
  for (const auto& e : c.history) {
    out += "epoch " + std::to_string(e.epoch) + ": loss " + format("%.4f", e.train_loss) + ", train acc " +
           format("%.4f", e.train_acc) + ", test acc " + format("%.4f", e.test_acc) + "\n";
  }
  out += "params: " + std::to_string(c.params.size()) + " tensors, " + std::to_string(values) + " values\n";
  out += "params digest: " + digest(c.params) + "\n";
  out += "buffers digest: " + digest(c.buffers) + " (" + std::to_string(c.buffers.size()) + " tensors)\n";
  out += "optimizer: " + c.optimizer + ", " + std::to_string(c.optimizer_steps) + " updates\n";
  out += "optimizer state digest: " + digest(c.optimizer_state) + " (" + std::to_string(c.optimizer_state.size()) +
         " tensors)\n";
  return out;
}

}  // namespace dpt::checkpoint
