// Convolutions of the CUDA backend on cuDNN. A plan per device and shape holds the
// descriptors and the algorithm cuDNN's heuristics rank first for each pass, so a
// training step sets nothing up after the first.
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "dpt/ops/cuda/cuda_kernels.h"
#include "dpt/ops/cuda/device_tensor.h"
#include "dpt/ops/cuda/launch.h"

namespace dpt::ops::cuda {

namespace {
using dpt::cuda::check;

// Workspace cuDNN may use per pass; algorithms that need more are skipped.
constexpr size_t kMaxWorkspace = size_t{1} << 30;

struct ConvPlan {
  ConvPlan(const Shape& x, const Shape& w, const Shape& y, ConvGeometry g) : x_desc(x), y_desc(y), w_desc(w) {
    check(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
    check(cudnnSetConvolution2dDescriptor(conv, g.padding, g.padding, g.stride, g.stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                          CUDNN_DATA_FLOAT),
          "cudnnSetConvolution2dDescriptor");
    // Plain fp32 FMAs, as the CPU backend: cuDNN's default would let Ampere and later GPUs
    // round the operands to TF32 (10 mantissa bits).
    check(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH), "cudnnSetConvolutionMathType");
  }
  ~ConvPlan() { cudnnDestroyConvolutionDescriptor(conv); }
  TensorDesc x_desc, y_desc;
  FilterDesc w_desc;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t forward{};
  cudnnConvolutionBwdDataAlgo_t backward_data{};
  cudnnConvolutionBwdFilterAlgo_t backward_filter{};
  size_t forward_bytes = 0, backward_data_bytes = 0, backward_filter_bytes = 0;
};

// Asks cuDNN's heuristics (`rank(capacity, &count, perf)`) for its ranking of one pass's
// algorithms and keeps the first that it says works within kMaxWorkspace.
template <class Perf, class Rank>
void choose(int capacity, Rank rank, const char* pass, decltype(Perf::algo)& algo, size_t& workspace_bytes) {
  std::vector<Perf> perf(static_cast<size_t>(capacity));
  int count = 0;
  check(rank(capacity, &count, perf.data()), pass);
  for (int i = 0; i < count; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace) {
      algo = perf[i].algo;
      workspace_bytes = perf[i].memory;
      return;
    }
  }
  throw std::runtime_error(std::string("cuDNN offers no ") + pass + " algorithm for these shapes");
}

std::unique_ptr<ConvPlan> make_plan(cudnnHandle_t h, const Shape& x, const Shape& w, const Shape& y, ConvGeometry g) {
  auto plan = std::make_unique<ConvPlan>(x, w, y, g);
  ConvPlan& p = *plan;
  choose<cudnnConvolutionFwdAlgoPerf_t>(
      CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
      [&](int capacity, int* count, cudnnConvolutionFwdAlgoPerf_t* perf) {
        return cudnnGetConvolutionForwardAlgorithm_v7(h, p.x_desc, p.w_desc, p.conv, p.y_desc, capacity, count, perf);
      },
      "convolution forward", p.forward, p.forward_bytes);
  choose<cudnnConvolutionBwdDataAlgoPerf_t>(
      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
      [&](int capacity, int* count, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w_desc, p.y_desc, p.conv, p.x_desc, capacity, count,
                                                           perf);
      },
      "convolution backward-data", p.backward_data, p.backward_data_bytes);
  choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
      [&](int capacity, int* count, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x_desc, p.y_desc, p.conv, p.w_desc, capacity, count,
                                                             perf);
      },
      "convolution backward-weights", p.backward_filter, p.backward_filter_bytes);
  return plan;
}

const ConvPlan& plan_for(dpt::cuda::Context& ctx, const Shape& x, const Shape& w, const Shape& y, ConvGeometry g) {
  using Key = std::tuple<int, Shape, Shape, int, int>;
  static std::mutex mutex;
  static std::map<Key, std::unique_ptr<ConvPlan>> plans;
  const Key key{ctx.device, x, w, g.stride, g.padding};
  std::lock_guard lock(mutex);
  auto& plan = plans[key];
  if (!plan) plan = make_plan(ctx.cudnn, x, w, y, g);
  return *plan;
}
}  // namespace

Tensor conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvGeometry g, const Shape& out_shape,
                      bool fuse_relu) {
  auto& ctx = context_of(x);
  const ConvPlan& plan = plan_for(ctx, x.shape(), weight.shape(), out_shape, g);
  Tensor y = Tensor::empty(out_shape, DType::f32, x.device());
  Workspace workspace(ctx.device, plan.forward_bytes);
  const float one = 1.0f, zero = 0.0f;
  check(cudnnConvolutionForward(ctx.cudnn, &one, plan.x_desc, f32(x), plan.w_desc, f32(weight), plan.conv, plan.forward,
                                workspace.data(), workspace.bytes(), &zero, plan.y_desc, f32(y)),
        "cudnnConvolutionForward");
  const int64_t plane = out_shape[2] * out_shape[3];
  if (bias.defined()) {
    add_channel_bias(f32(y), f32(bias), out_shape[0], out_shape[1], plane, fuse_relu, ctx.stream);
  } else if (fuse_relu) {
    relu_forward(f32(y), f32(y), y.numel(), ctx.stream);
  }
  return y;
}

Tensor conv2d_backward_data(const Tensor& grad_out, const Tensor& weight, const Shape& x_shape, ConvGeometry g) {
  auto& ctx = context_of(grad_out);
  const ConvPlan& plan = plan_for(ctx, x_shape, weight.shape(), grad_out.shape(), g);
  Tensor grad_x = Tensor::empty(x_shape, DType::f32, grad_out.device());
  Workspace workspace(ctx.device, plan.backward_data_bytes);
  const float one = 1.0f, zero = 0.0f;
  check(cudnnConvolutionBackwardData(ctx.cudnn, &one, plan.w_desc, f32(weight), plan.y_desc, f32(grad_out), plan.conv,
                                     plan.backward_data, workspace.data(), workspace.bytes(), &zero, plan.x_desc,
                                     f32(grad_x)),
        "cudnnConvolutionBackwardData");
  return grad_x;
}

void conv2d_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                             const Tensor& grad_bias, ConvGeometry g) {
  auto& ctx = context_of(grad_out);
  const ConvPlan& plan = plan_for(ctx, x.shape(), grad_weight.shape(), grad_out.shape(), g);
  Workspace workspace(ctx.device, plan.backward_filter_bytes);
  const float one = 1.0f, zero = 0.0f;
  check(cudnnConvolutionBackwardFilter(ctx.cudnn, &one, plan.x_desc, f32(x), plan.y_desc, f32(grad_out), plan.conv,
                                       plan.backward_filter, workspace.data(), workspace.bytes(), &zero, plan.w_desc,
                                       f32(grad_weight)),
        "cudnnConvolutionBackwardFilter");
  if (grad_bias.defined()) {
    const TensorDesc bias_desc({1, grad_bias.dim(0), 1, 1});
    check(cudnnConvolutionBackwardBias(ctx.cudnn, &one, plan.y_desc, f32(grad_out), &zero, bias_desc, f32(grad_bias)),
          "cudnnConvolutionBackwardBias");
  }
}

}  // namespace dpt::ops::cuda
