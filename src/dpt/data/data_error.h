// DataError: a problem with the training data a user can fix (missing, damaged or
// mismatched files). Its message names the file, the cause and the fix, so the CLI can
// print it as-is and stop; callers need not add context.
#pragma once

#include <stdexcept>

namespace dpt::data {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace dpt::data
