// Structured logging: one line per event on stderr, logfmt (default) or JSON lines, each with
// a level, a timestamp, the pass id when there is one, a message and fields. Callers must never
// pass a password, token, hash or credential-bearing URL as a field.
//
// Thread-safety: Log may be called from any thread (lines are written whole, under a mutex).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace mesh::reconciler {

enum class LogLevel { kDebug, kInfo, kWarn, kError };
enum class LogFormat { kLogfmt, kJson };

void ConfigureLogging(LogLevel min_level, LogFormat format);
LogLevel ParseLogLevel(std::string_view text);  // unknown -> kInfo

using LogField = std::pair<std::string_view, std::string>;
// pass_id 0: not within a pass.
void Log(LogLevel level, uint64_t pass_id, std::string_view message,
         std::initializer_list<LogField> fields = {});

// Unix milliseconds -> "2026-11-29T10:55:30.123Z" (UTC, RFC 3339; pure).
std::string FormatRfc3339Millis(int64_t unix_ms);

// The formatting alone (pure, for tests): `now` as RFC 3339.
std::string FormatLogLine(LogFormat format, LogLevel level, std::string_view now, uint64_t pass_id,
                          std::string_view message, std::initializer_list<LogField> fields);

}  // namespace mesh::reconciler
