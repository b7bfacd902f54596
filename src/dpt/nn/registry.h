// Models by name: the one table train, evaluate, predict and export build from. "lenet"
// and "resnet18" are in it from the start; a program adds its own with register_model
// before it trains, so that the same program can evaluate and export the checkpoints of
// it (a checkpoint records the model's name, input shape and classes).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dpt/core/image_shape.h"
#include "dpt/nn/module.h"

namespace dpt::nn {

// Builds the model for images of `input` and `classes` classes.
using ModelBuilder = std::function<std::unique_ptr<Module>(const ImageShape& input, int64_t classes)>;

// Adds `name`; throws std::invalid_argument for an empty name, a name taken already, or
// no builder.
void register_model(const std::string& name, ModelBuilder builder);
bool has_model(const std::string& name);
// Throws ConfigError (`model`) unless `name` is registered: "`model` must be lenet or
// resnet18, got 'x'".
void check_model_name(const std::string& name);
// Every registered name, sorted.
std::vector<std::string> model_names();
// Throws ConfigError (`model`) for a name not registered ("`model` must be lenet or
// resnet18, got 'x'"), and whatever the builder throws (ConfigError for images the model
// cannot take).
std::unique_ptr<Module> build_model(const std::string& name, const ImageShape& input, int64_t classes);

}  // namespace dpt::nn
