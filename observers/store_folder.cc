#include "observers/store_folder.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace mesh::observers {

std::string StreamsFolder(const std::string& store_dir, std::string_view account) {
  std::string folder = store_dir;
  while (folder.size() > 1 && folder.back() == '/') folder.pop_back();
  return folder + "/jetstream/" + std::string(account) + "/streams";
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
