// A trained network as an ONNX model, built with the ONNX library's protobuf classes
// (libonnx-dev), for any runtime that reads ONNX (OpenCV's dnn, onnxruntime, ...).
// Exports the layers the lesson's networks use: Conv2d (Conv), Linear (Gemm, transB),
// ReLU, AvgPool2d (AveragePool), MaxPool2d, GlobalAvgPool2d (GlobalAveragePool), Flatten,
// BatchNorm2d (BatchNormalization in inference mode: the running statistics), Residual
// blocks (two conv/BN pairs, the 1x1 projection or the identity shortcut, Add, Relu) and
// Sequential. Input "images" [N, C, H, W] float (N free), output "logits" [N, classes].
#pragma once

#include <filesystem>
#include <string>

#include "dpt/core/image_shape.h"
#include "dpt/nn/module.h"

namespace dpt::exporter {

// The ONNX operator set the exported graph uses.
inline constexpr int kOnnxOpset = 13;

// What the graph takes and gives: images of `input`, logits of `classes`.
struct OnnxSignature {
  ImageShape input;
  int64_t classes = 0;
};

// The serialized ONNX ModelProto of `net` (checked with onnx::checker). `description`
// goes into the model's doc_string. Throws std::invalid_argument for a layer it cannot
// export, naming it.
std::string onnx_model_bytes(const nn::Module& net, const OnnxSignature& signature, const std::string& description);

// Writes onnx_model_bytes(net, signature, description) to `file`; throws
// std::runtime_error naming the path and the reason.
void write_onnx(const std::filesystem::path& file, const nn::Module& net, const OnnxSignature& signature,
                const std::string& description);

}  // namespace dpt::exporter
