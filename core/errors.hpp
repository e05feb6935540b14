// SPDX-License-Identifier: Apache-2.0
// Typed exceptions of the public API. Messages follow "<layer, option or file>: <what>, expected X, got Y".
#pragma once

#include <stdexcept>
#include <string>

namespace dtnn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller passed a value that breaks a documented rule (shape, option, hyper-parameter).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A file could not be read, or its content is not what its format promises.
class DataError : public Error {
 public:
  using Error::Error;
};

// StarPU refused something, or a task failed on a worker thread (re-raised at the next synchronisation).
class RuntimeError : public Error {
 public:
  using Error::Error;
};

}  // namespace dtnn
