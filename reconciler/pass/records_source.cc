#include "reconciler/pass/records_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "model/digest.h"
#include "observers/regular_file.h"

namespace mesh::reconciler {
namespace {

// A file modified less than kQuiet ago may still be being written: file times come from the
// kernel's coarse clock, so two writes a few milliseconds apart can leave the same mtime, and a
// before/after comparison alone cannot see the second one. Once the file has been quiet for
// kQuiet, any write during the read moves its mtime. We wait at most kSettleLimit for quiet.
constexpr auto kQuiet = std::chrono::milliseconds(100);
constexpr auto kSettleLimit = std::chrono::seconds(1);

std::chrono::nanoseconds AsDuration(const timespec& t) {
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

// How long ago the file was last modified (negative for a time in the future).
std::chrono::nanoseconds SinceModified(const struct stat& st) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return AsDuration(now) - AsDuration(st.st_mtim);
}

bool SameVersion(const struct stat& a, const struct stat& b) {
  return a.st_ino == b.st_ino && a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
         a.st_mtim.tv_nsec == b.st_mtim.tv_nsec && a.st_ctim.tv_sec == b.st_ctim.tv_sec &&
         a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

// The file's bytes, or the outcome that refuses it unread (larger than the limit).
struct ReadOutcome {
  std::string bytes;
  std::optional<model::ParseOutcome> refused;
};

Result<ReadOutcome> ReadRecordsFile(const std::string& path) {
  if (path.empty()) return Status(Errc::kInvalidArgument, "no records file given (--records)");
  // Without blocking: a FIFO in the records' place is refused, not waited on for ever.
  Result<observers::OpenedFile> opened = observers::OpenRegularFile(path, "records");
  if (!opened.ok()) return opened.status();
  const observers::UniqueFd& fd = opened->fd;
  struct stat st = opened->info;
  // Written in place a moment ago: wait until it has been left alone (a mtime in the future
  // cannot be judged; the comparison after the read still applies).
  const auto settle_until = std::chrono::steady_clock::now() + kSettleLimit;
  for (auto since = SinceModified(st); since >= std::chrono::nanoseconds(0) && since < kQuiet;
       since = SinceModified(st)) {
    if (std::chrono::steady_clock::now() >= settle_until) {
      return Status(Errc::kUnavailable, "records " + path + " are still being written");
    }
    std::this_thread::sleep_for(kQuiet - since);
    if (::fstat(*fd, &st) != 0) {
      return Status(Errc::kIo, "cannot stat records " + path + ": " + std::strerror(errno));
    }
  }
  if (static_cast<size_t>(st.st_size) > model::kMaxRecordsBytes) {
    model::ParseOutcome outcome;
    outcome.errors.push_back({"$", "the file is " + std::to_string(st.st_size) +
                                       " bytes, more than the limit of " +
                                       std::to_string(model::kMaxRecordsBytes)});
    return ReadOutcome{"", std::move(outcome)};
  }
  std::string bytes;
  bytes.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::pread(*fd, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return Status(Errc::kIo, "cannot read records " + path + ": " + std::strerror(errno));
    if (n == 0) break;  // truncated while we read: parse what the size said, no more
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  // Written in place while we read (not replaced by rename): never act on half a file.
  struct stat after {};
  if (::fstat(*fd, &after) != 0 || !SameVersion(st, after) ||
      got != static_cast<size_t>(st.st_size)) {
    return Status(Errc::kUnavailable, "records " + path + " changed while being read");
  }
  return ReadOutcome{std::move(bytes), std::nullopt};
}

model::ParseOutcome Parse(const std::string& bytes, const std::string& reconciler_user) {
  model::ParseOptions options;
  options.reconciler_user = reconciler_user;
  return model::ParseRecords(bytes, options);
}

}  // namespace

Result<model::ParseOutcome> LoadRecords(const std::string& path,
                                        const std::string& reconciler_user) {
  Result<ReadOutcome> read = ReadRecordsFile(path);
  if (!read.ok()) return read.status();
  if (read->refused) return std::move(*read->refused);
  return Parse(read->bytes, reconciler_user);
}

Result<std::optional<model::ParseOutcome>> LoadRecordsIfChanged(const std::string& path,
                                                                const std::string& reconciler_user,
                                                                const std::string& unchanged_from,
                                                                std::string& digest) {
  digest.clear();
  Result<ReadOutcome> read = ReadRecordsFile(path);
  if (!read.ok()) return read.status();
  if (read->refused) return std::optional<model::ParseOutcome>(std::move(*read->refused));
  digest = model::Sha256(read->bytes);
  if (!unchanged_from.empty() && digest == unchanged_from) {
    return std::optional<model::ParseOutcome>();
  }
  return std::optional<model::ParseOutcome>(Parse(read->bytes, reconciler_user));
}

}  // namespace mesh::reconciler
