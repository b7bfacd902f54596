#include "dpt/nn/registry.h"

#include <map>
#include <mutex>
#include <stdexcept>
#include <string_view>

#include "dpt/core/config_error.h"
#include "dpt/nn/models.h"

namespace dpt::nn {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, ModelBuilder> builders{
      {"lenet", [](const ImageShape& in, int64_t classes) { return lenet_module(in, classes); }},
      {"resnet18", [](const ImageShape& in, int64_t classes) { return resnet18(in, classes); }},
  };
};

Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

void register_model(const std::string& name, ModelBuilder builder) {
  if (name.empty() || !builder) throw std::invalid_argument("register_model: give a name and a builder");
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  if (!r.builders.emplace(name, std::move(builder)).second) {
    throw std::invalid_argument("register_model: a model named '" + name + "' is registered already; pick another name");
  }
}

bool has_model(const std::string& name) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  return r.builders.count(name) > 0;
}

std::vector<std::string> model_names() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, builder] : r.builders) names.push_back(name);
  return names;
}

void check_model_name(const std::string& name) {
  if (has_model(name)) return;
  const std::vector<std::string> names = model_names();
  const std::vector<std::string_view> choices(names.begin(), names.end());
  throw bad_choice("model", name, choices);
}

std::unique_ptr<Module> build_model(const std::string& name, const ImageShape& input, int64_t classes) {
  ModelBuilder builder;
  {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    const auto found = r.builders.find(name);
    if (found != r.builders.end()) builder = found->second;
  }
  if (!builder) check_model_name(name);  // throws, naming the registered models
  return builder(input, classes);
}

}  // namespace dpt::nn
