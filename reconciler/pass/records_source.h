// Reading the records file from disk: the only I/O in front of model::ParseRecords.
// The file is read whole, with a size check first (a file larger than kMaxRecordsBytes is
// refused without reading it), so the parser never sees half a file: a file modified less than
// 100 ms ago is first left to settle (at most 1 s, then kUnavailable "still being written"),
// and a file whose inode, size, mtime or ctime moved during the read is kUnavailable "changed
// while being read". A writer that pauses longer than that mid-file, rewriting in place
// without truncating, cannot be told from a finished one (docs/faults.md).
//
// Thread-safety: free function.
#pragma once

#include <optional>
#include <string>

#include "model/records.h"
#include "model/result.h"

namespace mesh::reconciler {

// An I/O error (absent, unreadable, too large) is a Status; validation errors are in the
// outcome. The reconciler's own user name is reserved in the records.
Result<model::ParseOutcome> LoadRecords(const std::string& path,
                                        const std::string& reconciler_user);

// LoadRecords for a caller that keeps what it parsed (the daemon, every pass): the file is read
// and checked the same way, and `digest` receives its bytes' SHA-256 (empty when it was not
// read whole). When that equals `unchanged_from` (non-empty: the digest of bytes parsed
// before), the bytes are not parsed again and the outcome is nullopt. At ten times the Large
// mesh parsing took a tenth of the daemon's CPU in a pass; the digest, a fiftieth of it.
Result<std::optional<model::ParseOutcome>> LoadRecordsIfChanged(const std::string& path,
                                                                const std::string& reconciler_user,
                                                                const std::string& unchanged_from,
                                                                std::string& digest);

}  // namespace mesh::reconciler
