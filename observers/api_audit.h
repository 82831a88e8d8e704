// The API audit advisories ($JS.EVENT.ADVISORY.API): the server sends one after answering each
// JetStream API request of the account (server/jetstream_api.go, sendAPIResponse and
// sendAPIErrResponse: the answer, then the audit), whoever sent it. Only one of them is read
// here: the answer to a stream's deletion, which a standalone 2.9 sends once the stream's store
// folder is removed (docs/faults.md, "Recreation").
//
// Pure; thread-safety: free functions over caller-owned values.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mesh::observers {

// The stream whose deletion this audit advisory reports succeeded ("subject" is
// $JS.API.STREAM.DELETE.<stream> and "response" carries "success":true); nullopt for any other
// audit, a failed deletion (a stream already gone answers with an error at once, while the
// deletion under way goes on) or a text that is not one. Cheap for the others, which are most:
// one substring search before any parse.
std::optional<std::string> StreamDeletionAnswered(std::string_view audit);

}  // namespace mesh::observers
