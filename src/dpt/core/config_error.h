// A setting of a training configuration that cannot work, naming the field it is about.
// Messages refer to settings only by field name in backquotes ("`batch_size` 2 is smaller
// than the 3 devices of `devices`: ..."), never by a command-line flag: the library does
// not know how its caller spells them. A front end (the dptrain CLI) rewrites every
// backquoted field into its own name for it, e.g. `batch_size` -> --batch-size.
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace dpt {

class ConfigError : public std::invalid_argument {
 public:
  // `field`: the config field at fault ("batch_size", "devices", ...); `message`: the whole
  // message, saying what is wrong and what would work.
  ConfigError(std::string field, const std::string& message) : std::invalid_argument(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// "a, b or c": a field's choices, for messages and help texts.
inline std::string choices_str(std::span<const std::string_view> choices) {
  std::string out;
  size_t i = 0;
  for (std::string_view c : choices) {
    out += std::string(i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + std::string(c);
    ++i;
  }
  return out;
}

// The error for a text that is none of a field's choices: "`on_nan` must be stop or skip,
// got 'ignore'".
inline ConfigError bad_choice(const std::string& field, std::string_view text,
                              std::span<const std::string_view> choices) {
  return ConfigError(field, "`" + field + "` must be " + choices_str(choices) + ", got '" + std::string(text) + "'");
}

}  // namespace dpt
