#include "observers/nats_error.h"

namespace mesh::observers {

Errc ErrcOf(natsStatus s) {
  switch (s) {
    case NATS_TIMEOUT:
      return Errc::kTimeout;
    case NATS_CONNECTION_AUTH_FAILED:
    case NATS_NOT_PERMITTED:
      return Errc::kRefused;
    case NATS_INVALID_ARG:
    case NATS_INVALID_SUBJECT:
      return Errc::kInvalidArgument;
    case NATS_SSL_ERROR:
      return Errc::kIo;
    default:
      return Errc::kUnavailable;
  }
}

Status NatsError(natsStatus s, const std::string& context) {
  const char* last = nats_GetLastError(nullptr);
  std::string text = (last != nullptr && *last != '\0') ? last : natsStatus_GetText(s);
  if (size_t end = text.find("): "); !text.empty() && text.front() == '(' && end != text.npos) {
    text.erase(0, end + 3);
  }
  return Status(ErrcOf(s), context + ": " + text);
}

}  // namespace mesh::observers
