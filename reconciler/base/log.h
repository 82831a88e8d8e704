// Structured logging: one line per event on stderr, logfmt (default) or JSON lines, each with
// a level, a timestamp, the pass id when there is one, a message and fields. Callers must never
// pass a password, token, hash or credential-bearing URL as a field.
//
// A field's value keeps its type: a count is logged as a number and a flag as a boolean, so a
// JSON line says {"drift":0,"converged":true}, never {"drift":"0"}; logfmt writes all three bare
// (drift=0 converged=true). docs/schemas/log.v1.schema.json describes a JSON line.
//
// A text field without text is left out of the line: `error=""` on every good lease round
// made each of them match the runbook's grep for errors. A field present means it has a value.
//
// Thread-safety: Log may be called from any thread (lines are written whole, under a mutex).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "model/enum_names.h"

namespace mesh::reconciler {

enum class LogLevel { kDebug, kInfo, kWarn, kError };
inline constexpr EnumNames<LogLevel, 4> kLogLevelNames{{{
    {LogLevel::kDebug, "debug"},
    {LogLevel::kInfo, "info"},
    {LogLevel::kWarn, "warn"},
    {LogLevel::kError, "error"},
}}};
static_assert(kLogLevelNames.Dense());
enum class LogFormat { kLogfmt, kJson };

void ConfigureLogging(LogLevel min_level, LogFormat format);
LogLevel ParseLogLevel(std::string_view text);  // unknown -> kInfo

// One field's value: text, an integer, a real number or a boolean.
class LogValue {
 public:
  enum class Type { kString, kNumber, kBool };

  LogValue(std::string text) : type_(Type::kString), text_(std::move(text)) {}
  LogValue(std::string_view text) : type_(Type::kString), text_(text) {}
  LogValue(const char* text) : type_(Type::kString), text_(text) {}
  LogValue(bool value) : type_(Type::kBool), text_(value ? "true" : "false") {}
  template <typename T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char>)
      LogValue(T value)
      : type_(Type::kNumber), text_(std::to_string(value)) {}
  // Written in the shortest form that reads back the same; a NaN or an infinity (which JSON
  // cannot hold) as the string "nan" / "inf" / "-inf".
  LogValue(double value);

  Type type() const { return type_; }
  // A number or boolean as JSON spells it; a string unquoted.
  const std::string& text() const { return text_; }

 private:
  Type type_;
  std::string text_;
};

using LogField = std::pair<std::string_view, LogValue>;
// pass_id 0: not within a pass.
void Log(LogLevel level, uint64_t pass_id, std::string_view message,
         std::initializer_list<LogField> fields = {});

// Unix milliseconds -> "2026-11-29T10:55:30.123Z" (UTC, RFC 3339; pure).
std::string FormatRfc3339Millis(int64_t unix_ms);
// The wall clock's now, in Unix milliseconds (for people, and for the bus hold's `until`).
int64_t UnixMillisNow();

// The formatting alone (pure, for tests): `now` as RFC 3339.
std::string FormatLogLine(LogFormat format, LogLevel level, std::string_view now, uint64_t pass_id,
                          std::string_view message, std::initializer_list<LogField> fields);

}  // namespace mesh::reconciler
