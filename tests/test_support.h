// Helpers shared by the test suites.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "dpt/core/config_error.h"
#include "dpt/core/random.h"
#include "dpt/core/tensor.h"
#include "dpt/cuda/runtime.h"
#include "dpt/nn/init.h"
#include "dpt/nn/layers.h"

namespace dpt::testing_support {

// Whether this build runs under ThreadSanitizer (much slower: tests shrink or wait longer).
#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

// The smallest network with every kind of state: conv, BatchNorm (running statistics),
// ReLU, global average pool and a linear layer, Kaiming-initialised from a fixed seed.
inline std::unique_ptr<nn::Sequential> small_bn_net() {
  auto net = std::make_unique<nn::Sequential>();
  net->add<nn::Conv2d>("conv", 1, 4, 3)
      .add<nn::BatchNorm2d>("bn", 4)
      .add<nn::ReLU>("relu")
      .add<nn::GlobalAvgPool2d>("pool")
      .add<nn::Flatten>("flatten")
      .add<nn::Linear>("fc", 4, 10);
  nn::init_weights(*net, nn::Init::kaiming, 9);
  return net;
}

// `batch` side x side images in U(0, 1) and labels in [0, 10), from `seed`.
inline std::pair<Tensor, Tensor> random_images(int64_t batch, uint64_t seed, int64_t side = 28) {
  Rng rng(seed);
  Tensor X = Tensor::empty({batch, 1, side, side});
  fill_uniform(X, 0.0f, 1.0f, rng);
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t& label : labels) label = static_cast<int64_t>(rng() % 10);
  return {X, Tensor::from_labels(labels)};
}

// A tensor of `shape` filled with U(low, high) from `seed`.
inline Tensor random_tensor(const Shape& shape, uint64_t seed, float low = -1.0f, float high = 1.0f) {
  Rng rng(seed);
  Tensor t = Tensor::empty(shape);
  fill_uniform(t, low, high, rng);
  return t;
}

// The message of the `Error` that f() throws, or "<no error>" when it throws none (any
// other exception escapes and fails the test).
template <class Error = std::exception>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

// "field: message" of the ConfigError `f` throws, or "<no ConfigError>".
inline std::string config_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.field() + ": " + e.what();
  }
  return "<no ConfigError>";
}

// A new empty directory `name` under a directory that belongs to this process alone
// (mkdtemp under $TMPDIR, removed when the process exits): two builds running ctest at
// once, or the same test run twice in parallel, never share or delete each other's files.
inline std::filesystem::path unique_temp_dir(const std::string& name) {
  static const std::filesystem::path root = [] {
    std::string templ = (std::filesystem::temp_directory_path() / "dpt_test_XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + templ);
    static const std::filesystem::path made = templ;
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(made, ignored);
    });
    return made;
  }();
  const std::filesystem::path dir = root / name;
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace dpt::testing_support

// Expects `statement` to throw ConfigError about `field_name` whose what() contains `text`.
#define EXPECT_CONFIG_ERROR(statement, field_name, text)     \
  EXPECT_THROW(                                              \
      {                                                      \
        try {                                                \
          statement;                                         \
        } catch (const ::dpt::ConfigError& e) {              \
          EXPECT_EQ(e.field(), field_name);                  \
          EXPECT_THAT(e.what(), ::testing::HasSubstr(text)); \
          throw;                                             \
        }                                                    \
      },                                                     \
      ::dpt::ConfigError)

// Expects `statement` to throw std::invalid_argument whose what() contains `text`.
#define EXPECT_INVALID_ARGUMENT(statement, text)             \
  EXPECT_THROW(                                              \
      {                                                      \
        try {                                                \
          statement;                                         \
        } catch (const std::invalid_argument& e) {           \
          EXPECT_THAT(e.what(), ::testing::HasSubstr(text)); \
          throw;                                             \
        }                                                    \
      },                                                     \
      std::invalid_argument)

// Skips the test, saying why, where the Fashion-MNIST directory is missing. Under
// DPT_REQUIRE_DATA=1 (set by scripts/test.sh, hence CI) a missing data set fails instead:
// there a skip would pass the accuracy bars without running them.
#define DPT_SKIP_WITHOUT_DATA()                                                                  \
  if (!std::filesystem::exists(DPT_DATA_DIR)) {                                                \
    if (std::getenv("DPT_REQUIRE_DATA"))                                                       \
      FAIL() << "DPT_REQUIRE_DATA is set but " << DPT_DATA_DIR                                 \
             << " is missing: install the Debian package dataset-fashion-mnist";               \
    GTEST_SKIP() << DPT_DATA_DIR << " is missing: install the Debian package dataset-fashion-mnist"; \
  }

// Skips the test, saying why, where this process has fewer than `n` CUDA GPUs. Under
// DPT_REQUIRE_GPU=1 (scripts/gpu-check) having no GPU at all fails instead: there a skip
// would hide a GPU that is present but unusable.
#define DPT_SKIP_WITHOUT_GPUS(n)                                                            \
  if (const int gpus = ::dpt::cuda::device_count(); gpus < (n)) {                           \
    if (gpus == 0 && std::getenv("DPT_REQUIRE_GPU"))                                        \
      FAIL() << "DPT_REQUIRE_GPU is set but: " << ::dpt::cuda::unavailable_reason();        \
    GTEST_SKIP() << "needs " << (n) << " CUDA GPU(s), this process has " << gpus            \
                 << (gpus == 0 ? ": " + ::dpt::cuda::unavailable_reason() : std::string()); \
  }
