// The part of the checkpoint format that touches live tensors, kept apart from the
// codec (checkpoint.cc) so that the codec builds alone, e.g. into the fuzz targets.
#include "dpt/checkpoint/checkpoint.h"

namespace dpt::checkpoint {

NamedTensor to_named(const std::string& name, const Tensor& t) { return {name, t.shape(), t.to_vector()}; }

void copy_into(const std::vector<NamedTensor>& saved, const std::vector<std::pair<std::string, Tensor>>& tensors,
               const std::string& what, const std::string& source) {
  if (saved.size() != tensors.size()) {
    throw CheckpointError("checkpoint " + source + " holds " + std::to_string(saved.size()) + " " + what +
                          " but the model has " + std::to_string(tensors.size()) +
                          "; it was written for another model (check `model` and `api`)");
  }
  for (size_t i = 0; i < saved.size(); ++i) {
    const auto& [name, tensor] = tensors[i];
    if (saved[i].name != name || saved[i].shape != tensor.shape()) {
      throw CheckpointError("checkpoint " + source + ": " + what + " " + std::to_string(i) + " is " + saved[i].name +
                            " " + shape_str(saved[i].shape) + " but the model's is " + name + " " +
                            shape_str(tensor.shape()) + "; it was written for another model");
    }
    tensor.copy_from(Tensor::from_vector(saved[i].values, saved[i].shape));
  }
}

}  // namespace dpt::checkpoint
