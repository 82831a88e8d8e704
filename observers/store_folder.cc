#include "observers/store_folder.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace mesh::observers {
namespace {

namespace fs = std::filesystem;

constexpr char kExpected[] =
    "nats-server's store_dir, the folder that holds jetstream/<account>/streams";

bool IsFolder(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

// The names in `dir` (sorted); an error when it cannot be listed.
Result<std::vector<std::string>> Names(const fs::path& dir) {
  std::error_code ec;
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) return Status(Errc::kIo, dir.string() + ": " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

// The account folders in `jetstream` (the folder nats-server prints): those holding streams/.
std::vector<std::string> AccountFolders(const fs::path& jetstream,
                                        const std::vector<std::string>& names) {
  std::vector<std::string> accounts;
  for (const std::string& name : names) {
    if (IsFolder(jetstream / name / "streams")) accounts.push_back(name);
  }
  return accounts;
}

std::string Listed(const std::vector<std::string>& names) {
  if (names.empty()) return "nothing";
  std::string out;
  for (size_t i = 0; i < names.size() && i < 5; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 5) out += ", ... (" + std::to_string(names.size()) + " entries)";
  return out;
}

std::string WithoutTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

Result<StoreDir> InspectStoreDir(const std::string& given) {
  const std::string dir = WithoutTrailingSlashes(given);
  const fs::path path(dir);
  auto refuse = [&](const std::string& found) {
    return Result<StoreDir>(Errc::kInvalidArgument,
                            "--store-dir " + dir + ": expected " + kExpected + "; found " + found);
  };
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    return refuse(ec && ec != std::errc::no_such_file_or_directory ? ec.message()
                                                                   : "no such folder");
  }
  if (!fs::is_directory(status)) return refuse("not a folder");
  Result<std::vector<std::string>> names = Names(path);
  if (!names.ok()) return refuse("it cannot be read: " + names.status().message());
  StoreDir out;
  out.path = dir;
  if (IsFolder(path / "jetstream")) {
    Result<std::vector<std::string>> inner = Names(path / "jetstream");
    if (!inner.ok()) return refuse("jetstream/ cannot be read: " + inner.status().message());
    out.accounts = AccountFolders(path / "jetstream", *inner);
    return out;
  }
  // An account's folder (<store_dir>/jetstream/<account>) or its streams folder given.
  const fs::path parent = path.parent_path();
  if (IsFolder(path / "streams") && parent.filename() == "jetstream") {
    return refuse("the folder of account " + path.filename().string() + " (streams/): give " +
                  parent.parent_path().string());
  }
  if (path.filename() == "streams" && parent.parent_path().filename() == "jetstream") {
    return refuse("the streams folder of account " + parent.filename().string() + ": give " +
                  parent.parent_path().parent_path().string());
  }
  std::vector<std::string> others = *names;
  std::erase(others, "lost+found");
  if (path.filename() == "jetstream") {
    out.accounts = AccountFolders(path, others);
    const bool cluster_meta = std::find(others.begin(), others.end(), "_js_") != others.end();
    if (!out.accounts.empty() || cluster_meta) {
      out.path = parent.string();
      out.layout = StoreDirLayout::kPrintedFolder;
      return out;
    }
  }
  if (others.empty()) {
    out.layout = StoreDirLayout::kNotCreatedYet;
    return out;
  }
  return refuse("no jetstream/ folder but " + Listed(others));
}

std::string StreamsFolder(const std::string& store_dir, std::string_view account) {
  return WithoutTrailingSlashes(store_dir) + "/jetstream/" + std::string(account) + "/streams";
}

Result<StoreFolder> StreamFolder(const std::string& streams_folder, const StreamName& stream) {
  struct stat st {};
  const std::string path = streams_folder + "/" + stream.str();
  if (lstat(path.c_str(), &st) == 0) return StoreFolder::kPresent;
  if (errno == ENOENT) return StoreFolder::kAbsent;
  return Status(Errc::kIo, path + ": " + std::strerror(errno));
}

Status CheckStreamsFolder(const std::string& streams_folder,
                          const std::vector<StreamName>& listed) {
  struct stat st {};
  if (stat(streams_folder.c_str(), &st) != 0) {
    return Status(Errc::kIo, streams_folder + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return Status(Errc::kIo, streams_folder + ": not a folder");
  for (const StreamName& stream : listed) {
    Result<StoreFolder> folder = StreamFolder(streams_folder, stream);
    if (folder.ok() && *folder == StoreFolder::kPresent) return Status::Ok();
  }
  return Status(Errc::kUnavailable, streams_folder + " holds none of the " +
                                        std::to_string(listed.size()) +
                                        " streams the server lists: not this server's store");
}

}  // namespace mesh::observers
