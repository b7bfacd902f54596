#include "dpt/export/onnx_export.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "dpt/nn/layers.h"

namespace dpt::exporter {

namespace {

// Builds the graph node by node; every value is named after the module path that made it.
class GraphBuilder {
 public:
  explicit GraphBuilder(::onnx::GraphProto& graph) : graph_(graph) {}

  // The tensor as an initializer named `name` (its values in plain f32).
  std::string initializer(const std::string& name, const Tensor& t) {
    ::onnx::TensorProto* init = graph_.add_initializer();
    init->set_name(name);
    init->set_data_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : t.shape()) init->add_dims(d);
    const std::vector<float> values = t.to(Device::cpu()).to_vector();
    init->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    return name;
  }

  ::onnx::NodeProto& node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                          const std::string& output) {
    ::onnx::NodeProto* n = graph_.add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& in : inputs) n->add_input(in);
    n->add_output(output);
    return *n;
  }

  static void ints(::onnx::NodeProto& n, const char* name, const std::vector<int64_t>& values) {
    ::onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }
  static void integer(::onnx::NodeProto& n, const char* name, int64_t value) {
    ::onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(value);
  }
  static void real(::onnx::NodeProto& n, const char* name, float value) {
    ::onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(value);
  }

  // Emits `module` (named `path`) applied to `input`; returns the name of its output.
  std::string emit(const nn::Module& module, const std::string& path, const std::string& input) {
    const std::string out = path;
    const auto param = [&](size_t i) {
      const auto& [name, t] = module.own_parameters().at(i);
      return initializer(path + "." + name, t);
    };
    const auto buffer = [&](size_t i) {
      const auto& [name, t] = module.own_buffers().at(i);
      return initializer(path + "." + name, t);
    };
    if (const auto* conv = dynamic_cast<const nn::Conv2d*>(&module)) {
      const Tensor& w = module.own_parameters().at(0).second;
      std::vector<std::string> inputs{input, param(0)};
      if (conv->has_bias()) inputs.push_back(param(1));
      ::onnx::NodeProto& n = node("Conv", path, inputs, out);
      ints(n, "kernel_shape", {w.dim(2), w.dim(3)});
      ints(n, "strides", {conv->stride(), conv->stride()});
      ints(n, "pads", {conv->padding(), conv->padding(), conv->padding(), conv->padding()});
      return out;
    }
    if (const auto* linear = dynamic_cast<const nn::Linear*>(&module)) {
      std::vector<std::string> inputs{input, param(0)};
      if (linear->has_bias()) inputs.push_back(param(1));
      integer(node("Gemm", path, inputs, out), "transB", 1);
      return out;
    }
    if (const auto* bn = dynamic_cast<const nn::BatchNorm2d*>(&module)) {
      // Inference mode: y = (x - running_mean) / sqrt(running_var + eps) * weight + bias.
      ::onnx::NodeProto& n = node("BatchNormalization", path, {input, param(0), param(1), buffer(0), buffer(1)}, out);
      real(n, "epsilon", bn->eps());
      return out;
    }
    if (dynamic_cast<const nn::ReLU*>(&module)) {
      node("Relu", path, {input}, out);
      return out;
    }
    if (dynamic_cast<const nn::Sigmoid*>(&module)) {
      node("Sigmoid", path, {input}, out);
      return out;
    }
    if (dynamic_cast<const nn::Tanh*>(&module)) {
      node("Tanh", path, {input}, out);
      return out;
    }
    if (const auto* pool = dynamic_cast<const nn::AvgPool2d*>(&module)) {
      ::onnx::NodeProto& n = node("AveragePool", path, {input}, out);
      ints(n, "kernel_shape", {pool->kernel(), pool->kernel()});
      ints(n, "strides", {pool->stride(), pool->stride()});
      return out;
    }
    if (const auto* pool = dynamic_cast<const nn::MaxPool2d*>(&module)) {
      ::onnx::NodeProto& n = node("MaxPool", path, {input}, out);
      ints(n, "kernel_shape", {pool->kernel(), pool->kernel()});
      ints(n, "strides", {pool->stride(), pool->stride()});
      return out;
    }
    const auto* adaptive = dynamic_cast<const nn::AdaptiveAvgPool2d*>(&module);
    if (dynamic_cast<const nn::GlobalAvgPool2d*>(&module) || (adaptive && adaptive->out_h() == 1 && adaptive->out_w() == 1)) {
      node("GlobalAveragePool", path, {input}, out);
      return out;
    }
    if (dynamic_cast<const nn::Dropout*>(&module)) return input;  // the identity at inference
    if (dynamic_cast<const nn::Flatten*>(&module)) {
      integer(node("Flatten", path, {input}, out), "axis", 1);
      return out;
    }
    if (const auto* residual = dynamic_cast<const nn::Residual*>(&module)) {
      // relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), as Residual::forward.
      const auto children = module.named_children();
      const auto child = [&](size_t i, const std::string& in) {
        return emit(*children.at(i).second, path + "." + children.at(i).first, in);
      };
      std::string y = child(1, child(0, input));
      const std::string relu1 = path + ".relu1";
      node("Relu", relu1, {y}, relu1);
      y = child(3, child(2, relu1));
      const std::string shortcut = residual->use_1x1conv() ? child(4, input) : input;
      const std::string sum = path + ".add";
      node("Add", sum, {y, shortcut}, sum);
      node("Relu", path + ".relu", {sum}, out);
      return out;
    }
    if (dynamic_cast<const nn::Sequential*>(&module)) {
      std::string h = input;
      for (const auto& [name, child] : module.named_children()) {
        h = emit(*child, path.empty() ? name : path + "." + name, h);
      }
      return h;
    }
    throw std::invalid_argument("cannot export the layer " + (path.empty() ? std::string("(the network)") : path) +
                                " to ONNX: its kind has no ONNX translation here");
  }

 private:
  ::onnx::GraphProto& graph_;
};

void tensor_type(::onnx::ValueInfoProto& value, const std::string& name, const std::vector<std::string_view>& dims) {
  value.set_name(name);
  ::onnx::TypeProto_Tensor* type = value.mutable_type()->mutable_tensor_type();
  type->set_elem_type(::onnx::TensorProto::FLOAT);
  for (std::string_view d : dims) {
    ::onnx::TensorShapeProto_Dimension* dim = type->mutable_shape()->add_dim();
    if (d == "N") {
      dim->set_dim_param("N");
    } else {
      dim->set_dim_value(std::stoll(std::string(d)));
    }
  }
}

}  // namespace

std::string onnx_model_bytes(const nn::Module& net, const OnnxSignature& signature, const std::string& description) {
  ::onnx::ModelProto model;
  model.set_ir_version(::onnx::IR_VERSION);
  model.set_producer_name("dptrain");
  model.set_doc_string(description);
  ::onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  ::onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("dptrain");
  const ImageShape& in = signature.input;
  tensor_type(*graph->add_input(), "images",
              {"N", std::to_string(in.channels), std::to_string(in.height), std::to_string(in.width)});
  GraphBuilder builder(*graph);
  const std::string last = builder.emit(net, "", "images");
  // The graph's output is called "logits": rename the last node's output.
  for (auto& node : *graph->mutable_node()) {
    for (auto& output : *node.mutable_output()) {
      if (output == last) output = "logits";
    }
  }
  tensor_type(*graph->add_output(), "logits", {"N", std::to_string(signature.classes)});
  ::onnx::checker::check_model(model);  // throws onnx::checker::ValidationError
  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw std::runtime_error("cannot serialize the ONNX model");
  return bytes;
}

void write_onnx(const std::filesystem::path& file, const nn::Module& net, const OnnxSignature& signature,
                const std::string& description) {
  const std::string bytes = onnx_model_bytes(net, signature, description);
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write ONNX file " + file.string() + ": " + std::strerror(errno));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write ONNX file " + file.string() + ": " + std::strerror(errno));
}

}  // namespace dpt::exporter
