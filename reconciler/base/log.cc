#include "reconciler/base/log.h"

#include <date/date.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "model/thread_safety.h"

namespace mesh::reconciler {
namespace {

std::atomic<LogLevel> g_min_level{LogLevel::kInfo};
std::atomic<LogFormat> g_format{LogFormat::kLogfmt};
Mutex g_write_mutex;

const char* LevelName(LogLevel level) {
  return kLogLevelNames.Name(level);
}

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void AppendLogfmtValue(std::string& out, std::string_view s) {
  bool quote = s.empty();
  for (unsigned char c : s) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\') quote = true;
  }
  if (!quote) {
    out += s;
    return;
  }
  AppendJsonString(out, s);  // logfmt quoting uses the same escapes
}

void AppendField(std::string& out, LogFormat format, std::string_view key, const LogValue& value,
                 bool first) {
  const bool bare = value.type() != LogValue::Type::kString;
  if (format == LogFormat::kJson) {
    if (!first) out += ',';
    AppendJsonString(out, key);
    out += ':';
    if (bare) {
      out += value.text();
    } else {
      AppendJsonString(out, value.text());
    }
  } else {
    if (!first) out += ' ';
    out += key;
    out += '=';
    AppendLogfmtValue(out, value.text());
  }
}

std::string NowRfc3339() {
  auto now = std::chrono::system_clock::now();
  return FormatRfc3339Millis(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count());
}

}  // namespace

LogValue::LogValue(double value) : type_(Type::kNumber) {
  if (!std::isfinite(value)) {
    type_ = Type::kString;
    text_ = std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
    return;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  text_.assign(buf, ec == std::errc() ? end : buf);
}

int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string FormatRfc3339Millis(int64_t unix_ms) {
  return date::format(
      "%FT%TZ", date::sys_time<std::chrono::milliseconds>(std::chrono::milliseconds(unix_ms)));
}

void ConfigureLogging(LogLevel min_level, LogFormat format) {
  g_min_level = min_level;
  g_format = format;
}

LogLevel ParseLogLevel(std::string_view text) {
  return kLogLevelNames.Parse(text).value_or(LogLevel::kInfo);
}

std::string FormatLogLine(LogFormat format, LogLevel level, std::string_view now, uint64_t pass_id,
                          std::string_view message, std::initializer_list<LogField> fields) {
  std::string out;
  if (format == LogFormat::kJson) out += '{';
  AppendField(out, format, "ts", now, true);
  AppendField(out, format, "level", LevelName(level), false);
  if (pass_id != 0) AppendField(out, format, "pass", LogValue(pass_id), false);
  AppendField(out, format, "msg", message, false);
  for (const auto& [key, value] : fields) {
    if (value.type() == LogValue::Type::kString && value.text().empty()) continue;
    AppendField(out, format, key, value, false);
  }
  if (format == LogFormat::kJson) out += '}';
  out += '\n';
  return out;
}

void Log(LogLevel level, uint64_t pass_id, std::string_view message,
         std::initializer_list<LogField> fields) {
  if (level < g_min_level.load()) return;
  std::string line = FormatLogLine(g_format.load(), level, NowRfc3339(), pass_id, message, fields);
  MutexLock lock(g_write_mutex);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace mesh::reconciler
