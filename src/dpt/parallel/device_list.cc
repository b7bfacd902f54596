#include "dpt/parallel/device_list.h"

#include <charconv>
#include <stdexcept>
#include <string>

#include "dpt/core/config_error.h"
#include "dpt/cuda/runtime.h"

namespace dpt::parallel {

namespace {
constexpr const char* kForms = "expected cpu:N (N CPU devices), cuda:I[,cuda:J...] or a device count such as 2";

ConfigError bad_devices(const std::string& text, const std::string& why) {
  return ConfigError("devices", "bad `devices` '" + text + "': " + why);
}

bool parse_count(std::string_view text, int& count) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, count);
  return !text.empty() && ec == std::errc() && ptr == end;
}

// What CUDA said when this process found no GPU (a caller may pass a count of 0 anyway).
std::string why_no_gpu() {
  const std::string reason = cuda::unavailable_reason();
  return reason.empty() ? std::string("this machine or build has no CUDA GPU") : reason;
}

void check_cuda_present(const Device& device, int cuda_device_count) {
  if (device.index >= cuda_device_count) {
    throw ConfigError(
        "devices", "device " + device.str() + " is not present: " +
        (cuda_device_count == 0 ? why_no_gpu() : "this machine has " + std::to_string(cuda_device_count) + " GPU(s)") +
        "; use `devices` cpu:N to train on CPU devices");
  }
}
}  // namespace

void check_devices_for_training(const std::vector<Device>& devices, double bucket_mb) {
  bool any_gpu = false, any_cpu = false;
  for (const Device& d : devices) (d.kind == Device::Kind::cuda ? any_gpu : any_cpu) = true;
  if (!any_gpu) return;
  if (any_cpu) {
    throw ConfigError("devices", "`devices` " + device_list_str(devices) +
                                     " mixes CPU and CUDA devices; train on one kind at a time");
  }
  if (bucket_mb > 0) {
    throw ConfigError("bucket_mb",
                      "`bucket_mb` with CUDA devices is not supported yet: NCCL allreduces the gradients after "
                      "backward (use `bucket_mb` 0)");
  }
}

void check_batch_covers_devices(int64_t batch_size, const std::vector<Device>& devices, const ProcessGroup& group) {
  const int64_t job_devices = static_cast<int64_t>(group.size()) * static_cast<int64_t>(devices.size());
  if (group.distributed() && batch_size < job_devices) {
    throw ConfigError("batch_size", "`batch_size` " + std::to_string(batch_size) + " is smaller than the " +
                                        std::to_string(job_devices) + " devices of the " + std::to_string(group.size()) +
                                        " processes: every device needs at least one example per batch");
  }
  if (batch_size < static_cast<int64_t>(devices.size())) {
    throw ConfigError("batch_size", "`batch_size` " + std::to_string(batch_size) + " is smaller than the " +
                                        std::to_string(devices.size()) +
                                        " devices: every device needs at least one example per batch");
  }
}

bool has_repeated_device(const std::vector<Device>& devices) {
  for (size_t i = 0; i < devices.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (devices[i] == devices[j]) return true;
    }
  }
  return false;
}

std::unique_ptr<Communicator> make_communicator(const std::vector<Device>& devices, std::string_view algorithm) {
  // NCCL refuses two ranks on one GPU, so a list naming a GPU twice reduces with the
  // in-process `algorithm` over host copies of the gradients (allreduce_tensors).
  if (!devices.empty() && devices[0].kind == Device::Kind::cuda && !has_repeated_device(devices)) {
    return make_nccl_communicator(devices);
  }
  return make_in_process_communicator(algorithm, static_cast<int>(devices.size()));
}

std::vector<Device> cpu_devices(int count) {
  std::vector<Device> devices;
  for (int i = 0; i < count; ++i) devices.push_back(Device::cpu(i));
  return devices;
}

std::vector<Device> parse_device_list(std::string_view text, int cuda_device_count) {
  const std::string whole(text);
  int count = 0;
  if (parse_count(text, count)) {  // "4": that many of the default kind
    if (count < 1) throw bad_devices(whole, "need at least one device");
    if (cuda_device_count == 0) return cpu_devices(count);
    std::vector<Device> gpus;
    for (int i = 0; i < count; ++i) {
      gpus.push_back({Device::Kind::cuda, i});
      check_cuda_present(gpus.back(), cuda_device_count);
    }
    return gpus;
  }
  if (text == "cpu") return cpu_devices(1);
  if (text.starts_with("cpu:") && text.find(',') == std::string_view::npos) {
    if (!parse_count(text.substr(4), count) || count < 1) {
      throw bad_devices(whole, std::string("cpu:N needs N >= 1 CPU devices (") + kForms + ")");
    }
    return cpu_devices(count);
  }

  std::vector<Device> devices;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    Device device;
    try {
      device = parse_device(text.substr(start, comma - start));
    } catch (const std::invalid_argument&) {
      throw bad_devices(whole, kForms);
    }
    if (device.kind == Device::Kind::cpu) {
      throw bad_devices(whole, "list CPU devices as a count, cpu:N");
    }
    check_cuda_present(device, cuda_device_count);
    // A GPU named twice (cuda:0,cuda:0) is allowed: two replicas on one GPU, each on its own
    // worker thread, reduced over the host (make_communicator).
    devices.push_back(device);
    start = comma + 1;
  }
  return devices;
}

}  // namespace dpt::parallel
