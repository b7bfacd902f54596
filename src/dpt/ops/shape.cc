#include "dpt/autograd/node.h"
#include "dpt/ops/check.h"
#include "dpt/ops/ops.h"

namespace dpt::ops {

namespace {
Shape resolve_shape(const Tensor& x, const Shape& requested) {
  Shape shape = requested;
  int64_t known = 1;
  int inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      require(inferred < 0, "reshape", "only one dimension may be -1 in " + shape_str(shape));
      inferred = static_cast<int>(i);
    } else {
      require(shape[i] >= 0, "reshape", "negative dimension in " + shape_str(shape));
      known *= shape[i];
    }
  }
  if (inferred >= 0 && known > 0) shape[inferred] = x.numel() / known;
  require(shape_numel(shape) == x.numel(), "reshape",
          "cannot view " + shape_str(x.shape()) + " (" + std::to_string(x.numel()) + " elements) as " +
              shape_str(requested));  // what the caller asked for, -1 included
  return shape;
}
}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  require(x.defined(), "reshape", "input is undefined");
  Tensor out = x.with_shape(resolve_shape(x, shape));
  if (autograd::should_record({&x})) {
    autograd::record(out, "reshape", {&x}, [x_shape = x.shape()](const Tensor& grad_out) -> std::vector<Tensor> {
      return {grad_out.with_shape(x_shape)};
    });
  }
  return out;
}

Tensor flatten(const Tensor& x) {
  require(x.defined() && x.ndim() >= 1, "flatten", "input must have a batch dimension");
  return reshape(x, {x.dim(0), -1});
}

}  // namespace dpt::ops
