// Replays inputs through a libFuzzer target's LLVMFuzzerTestOneInput without libFuzzer, so that
// the regular g++ builds (plain, ASan+UBSan, TSan) run every seed and every regression input on
// each test run; see tests/fuzz/README.md.
//
// Usage: <target>_replay PATH...   Each PATH is a file or a folder (its regular files, sorted,
// not recursing). A PATH that does not exist counts as empty: a target may have no regressions
// yet. Exit 0 when every input ran (a target that finds a violation aborts, failing the test);
// exit 2 when an input cannot be read or no input was found at all.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> Inputs(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {path};
  std::vector<fs::path> files;
  if (!fs::is_directory(path, ec)) return files;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  size_t ran = 0;
  for (int i = 1; i < argc; ++i) {
    for (const fs::path& input : Inputs(argv[i])) {
      std::ifstream in(input, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "cannot read %s\n", input.c_str());
        return 2;
      }
      const std::string bytes((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
      std::printf("replaying %s (%zu bytes)\n", input.c_str(), bytes.size());
      std::fflush(stdout);  // the last line names the input when the target aborts
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++ran;
    }
  }
  std::printf("%zu inputs replayed\n", ran);
  return ran == 0 ? 2 : 0;
}
