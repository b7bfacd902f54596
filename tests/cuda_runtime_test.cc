// The CUDA runtime under load: tensors past 2^24 elements (past the 65535-block grid cap
// and the 64 MiB staging limit), back-to-back staged copies of mixed sizes whose host
// buffers are overwritten at once, and the caching allocator under stress, with an
// allocation no GPU can satisfy failing cleanly and leaving the device usable. Each test
// is skipped where this process sees no GPU (DPT_REQUIRE_GPU=1 makes that a failure).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "dpt/core/tensor.h"
#include "dpt/cuda/runtime.h"
#include "dpt/ops/ops.h"
#include "test_support.h"

using dpt::Device;
using dpt::DType;
using dpt::Tensor;
namespace cuda = dpt::cuda;
namespace ops = dpt::ops;

namespace {
const Device kGpu{Device::Kind::cuda, 0};

TEST(CudaRuntime, TensorsPast16MElementsAreComputedWhole) {
  DPT_SKIP_WITHOUT_GPUS(1);
  // 2^24 + 1000 elements: more than 65535 blocks of 256 threads cover (the grid-stride
  // loops must go round), and 64 MiB + 4000 bytes (copied unstaged).
  const int64_t n = (int64_t{1} << 24) + 1000;
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    a[static_cast<size_t>(i)] = static_cast<float>(i % 1000) - 500.0f;
    b[static_cast<size_t>(i)] = static_cast<float>(i % 7);
  }
  const Tensor ga = Tensor::from_vector(a, {n}).to(kGpu), gb = Tensor::from_vector(b, {n}).to(kGpu);
  const std::vector<float> sum = ops::add(ga, gb).to_vector(), relu = ops::relu(ga).to_vector();
  ASSERT_EQ(sum.size(), static_cast<size_t>(n));
  int64_t wrong_sum = 0, wrong_relu = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    wrong_sum += sum[k] != a[k] + b[k];
    wrong_relu += relu[k] != (a[k] > 0.0f ? a[k] : 0.0f);
  }
  EXPECT_EQ(wrong_sum, 0);
  EXPECT_EQ(wrong_relu, 0);
  EXPECT_EQ(sum.back(), a.back() + b.back());  // the last element, past 2^24
}

TEST(CudaRuntime, BackToBackStagedCopiesOfMixedSizesSurviveHostOverwrites) {
  DPT_SKIP_WITHOUT_GPUS(1);
  // Sizes around the two staging buffers' growth: each copy may reuse or grow a slot while
  // the stream still reads the other; the host buffer is overwritten as soon as the copy
  // returns, so the GPU must have what the buffer held at the call.
  const std::vector<size_t> counts{1, 3000, 17, 250000, 5, 4000000, 128, 250000, 1, 2000000, 64, 9};
  std::vector<void*> blocks;
  std::vector<float> host;
  for (size_t c = 0; c < counts.size(); ++c) {
    host.assign(counts[c], static_cast<float>(c + 1));
    for (size_t i = 0; i < counts[c]; i += 97) host[i] = static_cast<float>(i);
    blocks.push_back(cuda::allocate(0, counts[c] * sizeof(float)));
    cuda::copy_from_host(0, blocks.back(), host.data(), counts[c] * sizeof(float));
    std::fill(host.begin(), host.end(), -1.0f);  // the caller may reuse its buffer at once
  }
  for (size_t c = 0; c < counts.size(); ++c) {
    std::vector<float> back(counts[c]);
    cuda::copy_to_host(0, back.data(), blocks[c], counts[c] * sizeof(float));
    size_t wrong = 0;
    for (size_t i = 0; i < counts[c]; ++i) {
      const float expected = i % 97 == 0 ? static_cast<float>(i) : static_cast<float>(c + 1);
      wrong += back[i] != expected;
    }
    EXPECT_EQ(wrong, 0u) << "copy " << c << " of " << counts[c] << " floats";
    cuda::release(0, blocks[c], counts[c] * sizeof(float));
  }
}

TEST(CudaRuntime, AllocatorStressAndAnImpossibleAllocationLeaveTheDeviceUsable) {
  DPT_SKIP_WITHOUT_GPUS(1);
  // Many sizes taken and given back in a shifting pattern: cached blocks are reused.
  std::vector<std::pair<void*, size_t>> live;
  for (int round = 0; round < 2000; ++round) {
    const size_t bytes = static_cast<size_t>(1 + (round * 7919) % 300000);
    live.emplace_back(cuda::allocate(0, bytes), bytes);
    if (live.size() > 50) {
      const size_t victim = static_cast<size_t>(round * 31) % live.size();
      cuda::release(0, live[victim].first, live[victim].second);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    }
  }
  for (const auto& [block, bytes] : live) cuda::release(0, block, bytes);
  // 1 PiB: cudaMalloc fails, the cache is emptied and the retry fails too; the error names
  // the request, and is cleared, so that the next kernel launch (checked) succeeds.
  const std::string error = dpt::testing_support::error_of<std::runtime_error>(
      [] { cuda::allocate(0, size_t{1} << 50); });
  EXPECT_NE(error.find("cudaMalloc of"), std::string::npos) << error;
  EXPECT_NE(error.find("on cuda:0"), std::string::npos) << error;
  const Tensor x = Tensor::from_vector({-1.0f, 2.0f, -3.0f, 4.0f}, {4}).to(kGpu);
  EXPECT_EQ(ops::relu(x).to_vector(), (std::vector<float>{0.0f, 2.0f, 0.0f, 4.0f}));
}

}  // namespace
