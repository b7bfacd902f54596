// DataError: a problem with the training data a user can fix (missing, damaged or
// mismatched files). Its message names the file, the cause and the fix, so the CLI can
// print it as-is and stop; callers need not add context.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

#include "dpt/core/text.h"

namespace dpt::data {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// 'path', as every data message quotes a file (printable: a name that is not UTF-8 shows
// its bytes). Appended rather than "'" + path + "'", which trips GCC 12's -Wrestrict false
// positive (GCC bug 105329).
inline std::string in_quotes(const std::filesystem::path& path) {
  std::string quoted = "'";
  quoted += printable(path.string());
  quoted += '\'';
  return quoted;
}

}  // namespace dpt::data
