// The source revision the binary was built from. Defined in build_info.cc alone, the only file
// compiled with the commit, so that a new commit recompiles one file, not every target.
#pragma once

namespace mesh::reconciler {

// `git rev-parse --short=12 HEAD` when CMake configured the build; "unknown" outside git.
const char* BuildCommit();

}  // namespace mesh::reconciler
