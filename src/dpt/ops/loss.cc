#include "dpt/autograd/node.h"
#include "dpt/ops/backend.h"
#include "dpt/ops/check.h"
#include "dpt/ops/ops.h"

namespace dpt::ops {

namespace {
void check_logits_and_labels(const Tensor& logits, const Tensor& labels, const std::string& op) {
  require_rank(logits, 2, op, "logits");
  require(labels.defined() && labels.dtype() == DType::i64 && labels.ndim() == 1, op,
          "labels must be a 1-D int64 tensor");
  require(labels.dim(0) == logits.dim(0), op,
          "logits " + shape_str(logits.shape()) + " and labels " + shape_str(labels.shape()) +
              " disagree on the batch size");
  require(labels.device().kind == Device::Kind::cpu ? logits.device().kind == Device::Kind::cpu
                                                    : labels.device() == logits.device(),
          op, "logits on " + logits.device().str() + " but labels on " + labels.device().str());
}
}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, Reduction reduction, float label_smoothing) {
  const std::string op = "cross_entropy";
  check_logits_and_labels(logits, labels, op);
  require(label_smoothing >= 0.0f && label_smoothing < 1.0f, op,
          "label_smoothing " + std::to_string(label_smoothing) + " is outside [0, 1)");
  CrossEntropyResult forward = backend_for(logits).cross_entropy_forward(logits, labels, reduction, label_smoothing);
  if (autograd::should_record({&logits})) {
    autograd::record(forward.loss, op, {&logits},
                     [probs = forward.probs, labels = labels.detach(), reduction, label_smoothing](const Tensor& grad_out) {
                       return std::vector<Tensor>{
                           backend_for(probs).cross_entropy_backward(probs, labels, grad_out, reduction, label_smoothing)};
                     });
  }
  return forward.loss;
}

Tensor mse_loss(const Tensor& x, const Tensor& targets, Reduction reduction) {
  const std::string op = "mse_loss";
  require_f32(x, op, "input");
  require_f32(targets, op, "targets");
  require(x.ndim() >= 1 && x.dim(0) > 0, op, "input " + shape_str(x.shape()) + " holds no examples");
  require(x.shape() == targets.shape(), op,
          "input " + shape_str(x.shape()) + " and targets " + shape_str(targets.shape()) +
              " differ in shape (one target per output)");
  require_same_device({&x, &targets}, op);
  Tensor loss = backend_for(x).mse_forward(x, targets, reduction);
  if (autograd::should_record({&x})) {
    autograd::record(loss, op, {&x}, [x = x.detach(), targets = targets.detach(), reduction](const Tensor& grad_out) {
      return std::vector<Tensor>{backend_for(x).mse_backward(x, targets, grad_out, reduction)};
    });
  }
  return loss;
}

void check_labels(const Tensor& labels, int64_t classes) {
  const int64_t* y = labels.data<int64_t>();
  for (int64_t i = 0; i < labels.numel(); ++i) {
    if (y[i] < 0 || y[i] >= classes) {
      throw std::invalid_argument("cross_entropy: label " + std::to_string(y[i]) + " at index " + std::to_string(i) +
                                  " is outside [0, " + std::to_string(classes) + ")");
    }
  }
}

Tensor argmax(const Tensor& x) {
  require_rank(x, 2, "argmax", "input");
  return backend_for(x).argmax(x);
}

int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  check_logits_and_labels(logits, labels, "count_correct");
  return backend_for(logits).count_correct(logits, labels);
}

}  // namespace dpt::ops
