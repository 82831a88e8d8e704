// libFuzzer target for ParseRecords (model/records.h): any bytes must give a clean outcome, never
// a crash, a hang or a sanitizer report. Seeds: tests/fuzz/corpus/records/.
//
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I. model/records.cc \
//       model/result.cc tests/fuzz/records_fuzz.cc -o /tmp/records_fuzz
//   /tmp/records_fuzz -max_total_time=60 tests/fuzz/corpus/records
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
