// A server's JetStream store on this machine's file system (--store-dir: the server's store_dir
// as mounted here, read only), for what the API of nats-server 2.9 does not tell: when a deleted
// stream's folder is gone. nats-server keeps a stream at
// <store_dir>/jetstream/<account>/streams/<stream> (server/jetstream.go: JetStreamStoreDir,
// streamsDir), its consumers inside it; a deletion removes that folder last
// (server/filestore.go, fileStore.Delete).
//
// Thread-safety: free functions; read only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/names.h"
#include "model/result.h"

namespace mesh::observers {

// What a --store-dir folder holds (InspectStoreDir).
enum class StoreDirLayout {
  kStore,  // <dir>/jetstream is a folder: <dir> is the server's store_dir, taken as given
  // <dir> is <store_dir>/jetstream, the folder nats-server prints at start ("Store Directory"):
  // it holds the account folders (<account>/streams) or the cluster's _js_; its parent is taken
  kPrintedFolder,
  // No JetStream layout yet: an empty folder (lost+found aside), as the data volume of a server
  // that has not started, or the printed folder of one that has no stream yet (the server
  // creates <account>/streams at an account's first stream). Taken as given; the pass inspects
  // it again at each use, when the layout has appeared.
  kNotCreatedYet,
};

struct StoreDir {
  std::string path;  // the store_dir to use (the parent of a printed folder)
  StoreDirLayout layout = StoreDirLayout::kStore;
  std::vector<std::string> accounts;  // account folders found (<path>/jetstream/<account>/streams)
};

// Reads `dir` (--store-dir) for nats-server's JetStream layout
// <store_dir>/jetstream/<account>/streams. Refused (kInvalidArgument; the message says what
// was expected and what was found, and the path to give where it can tell): a folder that does
// not exist or cannot be read, an account's folder or its streams folder, and a folder that
// holds other things but no JetStream layout.
Result<StoreDir> InspectStoreDir(const std::string& dir);

// <store_dir>/jetstream/<account>/streams
std::string StreamsFolder(const std::string& store_dir, std::string_view account);

enum class StoreFolder { kPresent, kAbsent };

// Whether `stream`'s folder is in `streams_folder`; an error when it cannot be told (no access).
Result<StoreFolder> StreamFolder(const std::string& streams_folder, const StreamName& stream);

// That `streams_folder` is this server's: it is a folder and holds the folder of at least one of
// `listed` (streams the server lists in that account now). A wrong mount would show every
// stream as absent, so a deletion would seem done at once: then the caller must not rely on it.
Status CheckStreamsFolder(const std::string& streams_folder, const std::vector<StreamName>& listed);

}  // namespace mesh::observers
