#include "model/result.h"

namespace mesh {

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(ErrcName(code_)) + ": " + message_;
}

}  // namespace mesh
