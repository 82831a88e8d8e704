// Errors are values. `Status` says whether an operation worked; `Result<T>` carries a value or
// the error that prevented it. "Not found" is data (std::optional, an empty list), never an
// error. Exceptions are reserved for bugs and are caught only at the loop boundary.
//
// Thread-safety: plain values; copy freely between threads.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include "model/enum_names.h"

namespace mesh {

enum class Errc {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong (records, flags, a request)
  kIo,               // a file or socket operation failed
  kTimeout,          // the bus or an endpoint did not answer in time
  kUnavailable,      // not connected, not ready (e.g. /healthz not ok)
  kRefused,          // the server answered with an error (JetStream API error, reload rejected)
  kUnsatisfiable,    // the records ask for something this bus cannot give (replicas > cluster)
  kInternal,         // a bug or an unexpected answer
};

// For people: "invalid argument" (Status::ToString, logs, tables).
inline constexpr EnumNames<Errc, 8> kErrcNames{{{
    {Errc::kOk, "ok"},
    {Errc::kInvalidArgument, "invalid argument"},
    {Errc::kIo, "i/o error"},
    {Errc::kTimeout, "timeout"},
    {Errc::kUnavailable, "unavailable"},
    {Errc::kRefused, "refused"},
    {Errc::kUnsatisfiable, "unsatisfiable"},
    {Errc::kInternal, "internal error"},
}}};
static_assert(kErrcNames.Dense());
// For programs: an identifier, "invalid_argument" (JSON outputs; docs/schemas/).
inline constexpr EnumNames<Errc, 8> kErrcIds{{{
    {Errc::kOk, "ok"},
    {Errc::kInvalidArgument, "invalid_argument"},
    {Errc::kIo, "io_error"},
    {Errc::kTimeout, "timeout"},
    {Errc::kUnavailable, "unavailable"},
    {Errc::kRefused, "refused"},
    {Errc::kUnsatisfiable, "unsatisfiable"},
    {Errc::kInternal, "internal_error"},
}}};
static_assert(kErrcIds.Dense());
inline const char* ErrcName(Errc code) {
  return kErrcNames.Name(code);
}
inline const char* ErrcId(Errc code) {
  return kErrcIds.Name(code);
}

class Status {
 public:
  Status() = default;
  Status(Errc code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Errc::kOk; }
  Errc code() const { return code_; }
  const std::string& message() const { return message_; }
  // "timeout: no answer from $JS.API.STREAM.LIST" - never contains a credential.
  std::string ToString() const;

 private:
  Errc code_ = Errc::kOk;
  std::string message_;
};

template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }  // NOLINT
  Result(Errc code, std::string message) : v_(Status(code, std::move(message))) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  // Status::Ok() when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace mesh
