// Convolutions of the CUDA backend on cuDNN. A plan per device and shape holds the
// descriptors and, for each pass once it has run, the algorithm cuDNN's heuristics rank
// first (in fp32 FMA math) with its workspace size, so a training step sets nothing up
// after the first.
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
#include "dpt/ops/precision.h"

namespace dpt::ops::cuda {

namespace {
using dpt::cuda::check;
using dpt::cuda::check_op;

// Workspace cuDNN may use per pass; algorithms that need more are skipped.
constexpr size_t kMaxWorkspace = size_t{1} << 30;

// A convolution descriptor of the plan's geometry in `math` mode.
cudnnConvolutionDescriptor_t make_conv(ConvGeometry g, cudnnMathType_t math) {
  cudnnConvolutionDescriptor_t conv = nullptr;
  check(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
  check(cudnnSetConvolution2dDescriptor(conv, g.padding, g.padding, g.stride, g.stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor");
  check(cudnnSetConvolutionMathType(conv, math), "cudnnSetConvolutionMathType");
  return conv;
}

// One pass's choice: its own convolution descriptor (set to the math type cuDNN ranked the
// algorithm with, which may differ between passes), the algorithm, and the workspace
// cudnnGetConvolution*WorkspaceSize gives for that algorithm on that descriptor.
template <class Algo>
struct PassPlan {
  cudnnConvolutionDescriptor_t conv = nullptr;
  Algo algo{};
  size_t workspace_bytes = 0;
};

struct ConvPlan {
  ConvPlan(const Shape& x, const Shape& w, const Shape& y) : x_desc(x), y_desc(y), w_desc(w) {}
  ~ConvPlan() {
    for (cudnnConvolutionDescriptor_t conv : {forward.conv, backward_data.conv, backward_filter.conv}) {
      if (conv) cudnnDestroyConvolutionDescriptor(conv);
    }
  }
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;
  TensorDesc x_desc, y_desc;
  FilterDesc w_desc;
  PassPlan<cudnnConvolutionFwdAlgo_t> forward;
  PassPlan<cudnnConvolutionBwdDataAlgo_t> backward_data;
  PassPlan<cudnnConvolutionBwdFilterAlgo_t> backward_filter;
};

// Asks cuDNN's heuristics (`rank(conv, capacity, &count, perf)`) for its ranking of one
// pass's algorithms and keeps the first that works within kMaxWorkspace in plain fp32 FMA
// math, as the CPU backend computes (the descriptor asks for CUDNN_FMA_MATH; cuDNN's default
// would let Ampere and later GPUs round the operands to TF32, 10 mantissa bits). The math
// type cuDNN suggests for the algorithm is honoured: set on the pass's descriptor (only
// CUDNN_FMA_MATH, or CUDNN_DEFAULT_MATH when no FMA candidate works, are accepted: the
// tensor-op types convert the operands). The workspace is then asked of
// `workspace(conv, algo, &bytes)` for that algorithm and math type rather than taken from
// the heuristic's figure; a candidate whose size query fails is skipped.
// With ops::conv_deterministic() only the candidates cuDNN marks CUDNN_DETERMINISTIC count.
template <class Perf, class Rank, class Size>
void choose(ConvGeometry g, int capacity, Rank rank, Size workspace, const char* pass,
            PassPlan<decltype(Perf::algo)>& plan) {
  const bool deterministic = conv_deterministic();
  cudnnConvolutionDescriptor_t query = make_conv(g, CUDNN_FMA_MATH);
  std::vector<Perf> perf(static_cast<size_t>(capacity));
  int count = 0;
  const cudnnStatus_t ranked = rank(query, capacity, &count, perf.data());
  cudnnDestroyConvolutionDescriptor(query);
  check(ranked, pass);
  for (const cudnnMathType_t math : {CUDNN_FMA_MATH, CUDNN_DEFAULT_MATH}) {
    for (int i = 0; i < count; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].mathType != math || perf[i].memory > kMaxWorkspace ||
          (deterministic && perf[i].determinism != CUDNN_DETERMINISTIC)) {
        continue;
      }
      cudnnConvolutionDescriptor_t conv = make_conv(g, perf[i].mathType);
      size_t bytes = 0;
      if (workspace(conv, perf[i].algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > kMaxWorkspace) {
        cudnnDestroyConvolutionDescriptor(conv);
        continue;
      }
      plan.conv = conv;
      plan.algo = perf[i].algo;
      plan.workspace_bytes = bytes;
      return;
    }
  }
  throw std::runtime_error(std::string("cuDNN offers no ") + (deterministic ? "deterministic " : "") + "fp32 " + pass +
                           " algorithm for these shapes");
}

enum class Pass { forward, backward_data, backward_filter };

// Chooses `pass` of plan `p` (its algorithm, math type and workspace).
void choose_pass(cudnnHandle_t h, ConvPlan& p, ConvGeometry g, Pass pass) {
  switch (pass) {
    case Pass::forward:
      choose<cudnnConvolutionFwdAlgoPerf_t>(
          g, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
          [&](cudnnConvolutionDescriptor_t conv, int capacity, int* count, cudnnConvolutionFwdAlgoPerf_t* perf) {
            return cudnnGetConvolutionForwardAlgorithm_v7(h, p.x_desc, p.w_desc, conv, p.y_desc, capacity, count,
                                                          perf);
          },
          [&](cudnnConvolutionDescriptor_t conv, cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
            return cudnnGetConvolutionForwardWorkspaceSize(h, p.x_desc, p.w_desc, conv, p.y_desc, algo, bytes);
          },
          "convolution forward", p.forward);
      return;
    case Pass::backward_data:
      choose<cudnnConvolutionBwdDataAlgoPerf_t>(
          g, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
          [&](cudnnConvolutionDescriptor_t conv, int capacity, int* count, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
            return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w_desc, p.y_desc, conv, p.x_desc, capacity, count,
                                                               perf);
          },
          [&](cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w_desc, p.y_desc, conv, p.x_desc, algo, bytes);
          },
          "convolution backward-data", p.backward_data);
      return;
    case Pass::backward_filter:
      choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
          g, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
          [&](cudnnConvolutionDescriptor_t conv, int capacity, int* count,
              cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
            return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x_desc, p.y_desc, conv, p.w_desc, capacity,
                                                                 count, perf);
          },
          [&](cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x_desc, p.y_desc, conv, p.w_desc, algo, bytes);
          },
          "convolution backward-weights", p.backward_filter);
      return;
  }
}

bool chosen(const ConvPlan& p, Pass pass) {
  switch (pass) {
    case Pass::forward: return p.forward.conv != nullptr;
    case Pass::backward_data: return p.backward_data.conv != nullptr;
    case Pass::backward_filter: return p.backward_filter.conv != nullptr;
  }
  return false;
}

// The plan of these shapes on ctx's device with `pass` chosen. Each pass is chosen on its
// first use, so a convolution that only ever runs forward (evaluation, inference) never
// asks cuDNN about its backward passes. A pass, once chosen, is never written again, so a
// caller reads its own pass after the lock while another thread chooses another.
const ConvPlan& plan_for(dpt::cuda::Context& ctx, const Shape& x, const Shape& w, const Shape& y, ConvGeometry g,
                         Pass pass) {
  using Key = std::tuple<int, Shape, Shape, int, int, bool>;
  static std::mutex mutex;
  // Never destroyed, on purpose: destroying the plans' descriptors from a static
  // destructor at exit may run after libcudnn has been unloaded (the order of the two is
  // not ours to choose), which crashes at exit. The process's end frees the memory.
  static auto* const plans = new std::map<Key, std::unique_ptr<ConvPlan>>;
  const Key key{ctx.device, x, w, g.stride, g.padding, conv_deterministic()};
  std::lock_guard lock(mutex);
  auto& plan = (*plans)[key];
  if (!plan) plan = std::make_unique<ConvPlan>(x, w, y);
  if (!chosen(*plan, pass)) choose_pass(ctx.cudnn, *plan, g, pass);
  return *plan;
}
}  // namespace

Tensor conv2d_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, ConvGeometry g, const Shape& out_shape,
                      bool fuse_relu) {
  auto& ctx = context_of(x);
  const ConvPlan& plan = plan_for(ctx, x.shape(), weight.shape(), out_shape, g, Pass::forward);
  Tensor y = Tensor::empty(out_shape, DType::f32, x.device());
  Workspace workspace(ctx.device, plan.forward.workspace_bytes);
  const float one = 1.0f, zero = 0.0f;
  check_op(cudnnConvolutionForward(ctx.cudnn, &one, plan.x_desc, f32(x), plan.w_desc, f32(weight), plan.forward.conv,
                                   plan.forward.algo, workspace.data(), workspace.bytes(), &zero, plan.y_desc, f32(y)),
           "cudnnConvolutionForward", ctx.stream);
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
  const ConvPlan& plan = plan_for(ctx, x_shape, weight.shape(), grad_out.shape(), g, Pass::backward_data);
  Tensor grad_x = Tensor::empty(x_shape, DType::f32, grad_out.device());
  Workspace workspace(ctx.device, plan.backward_data.workspace_bytes);
  const float one = 1.0f, zero = 0.0f;
  check_op(cudnnConvolutionBackwardData(ctx.cudnn, &one, plan.w_desc, f32(weight), plan.y_desc, f32(grad_out),
                                        plan.backward_data.conv, plan.backward_data.algo, workspace.data(),
                                        workspace.bytes(), &zero, plan.x_desc, f32(grad_x)),
           "cudnnConvolutionBackwardData", ctx.stream);
  return grad_x;
}

void conv2d_backward_weights(const Tensor& grad_out, const Tensor& x, const Tensor& grad_weight,
                             const Tensor& grad_bias, ConvGeometry g) {
  auto& ctx = context_of(grad_out);
  const ConvPlan& plan = plan_for(ctx, x.shape(), grad_weight.shape(), grad_out.shape(), g, Pass::backward_filter);
  Workspace workspace(ctx.device, plan.backward_filter.workspace_bytes);
  const float one = 1.0f, zero = 0.0f;
  check_op(cudnnConvolutionBackwardFilter(ctx.cudnn, &one, plan.x_desc, f32(x), plan.y_desc, f32(grad_out),
                                          plan.backward_filter.conv, plan.backward_filter.algo, workspace.data(),
                                          workspace.bytes(), &zero, plan.w_desc, f32(grad_weight)),
           "cudnnConvolutionBackwardFilter", ctx.stream);
  if (grad_bias.defined()) {
    const TensorDesc bias_desc({1, grad_bias.dim(0), 1, 1});
    check_op(
        cudnnConvolutionBackwardBias(ctx.cudnn, &one, plan.y_desc, f32(grad_out), &zero, bias_desc, f32(grad_bias)),
        "cudnnConvolutionBackwardBias", ctx.stream);
  }
}

}  // namespace dpt::ops::cuda
