#include "model/result.h"

namespace mesh {

const char* ErrcName(Errc code) {
  switch (code) {
    case Errc::kOk:
      return "ok";
    case Errc::kInvalidArgument:
      return "invalid argument";
    case Errc::kIo:
      return "i/o error";
    case Errc::kTimeout:
      return "timeout";
    case Errc::kUnavailable:
      return "unavailable";
    case Errc::kRefused:
      return "refused";
    case Errc::kUnsatisfiable:
      return "unsatisfiable";
    case Errc::kInternal:
      return "internal error";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(ErrcName(code_)) + ": " + message_;
}

}  // namespace mesh
