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
