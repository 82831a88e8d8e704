// libFuzzer target for ParseRecords (model/records.h): any bytes must give a clean outcome, never
// a crash, a hang or a sanitizer report. Seeds: tests/fuzz/corpus/records/.
//
// Built with clang by -DMESH_BUILD_FUZZ=ON (target records_fuzz) and run by the fuzz stage of
// scripts/test.sh; every regular build replays its corpus and regressions (records_fuzz_replay).
// tests/fuzz/README.md says how a crash becomes a regression test.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model/records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  const mesh::model::ParseOutcome outcome = mesh::model::ParseRecords(json);
  // Every error names a path and says what is wrong.
  for (const mesh::model::ValidationError& error : outcome.errors) {
    if (error.path.empty() || error.message.empty()) std::abort();
  }
  return 0;
}
