#include "model/result.h"

namespace mesh {

namespace {

struct ErrcNames {
  Errc code;
  const char* name;  // for people
  const char* id;    // for programs
};

constexpr ErrcNames kErrcNames[] = {
    {Errc::kOk, "ok", "ok"},
    {Errc::kInvalidArgument, "invalid argument", "invalid_argument"},
    {Errc::kIo, "i/o error", "io_error"},
    {Errc::kTimeout, "timeout", "timeout"},
    {Errc::kUnavailable, "unavailable", "unavailable"},
    {Errc::kRefused, "refused", "refused"},
    {Errc::kUnsatisfiable, "unsatisfiable", "unsatisfiable"},
    {Errc::kInternal, "internal error", "internal_error"},
};

const ErrcNames* Find(Errc code) {
  for (const ErrcNames& names : kErrcNames) {
    if (names.code == code) return &names;
  }
  return nullptr;
}

}  // namespace

const char* ErrcName(Errc code) {
  const ErrcNames* names = Find(code);
  return names != nullptr ? names->name : "unknown";
}

const char* ErrcId(Errc code) {
  const ErrcNames* names = Find(code);
  return names != nullptr ? names->id : "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(ErrcName(code_)) + ": " + message_;
}

}  // namespace mesh
