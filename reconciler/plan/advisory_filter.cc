#include "reconciler/plan/advisory_filter.h"

#include "model/desired.h"
#include "observers/jetstream_api.h"

namespace mesh::reconciler {
namespace {

using observers::jsapi::kConsumerCreated;
using observers::jsapi::kConsumerDeleted;
using observers::jsapi::kStreamCreated;
using observers::jsapi::kStreamDeleted;
using observers::jsapi::kStreamUpdated;

constexpr std::string_view kStreamPrefixes[] = {kStreamCreated, kStreamDeleted, kStreamUpdated};
constexpr std::string_view kConsumerPrefixes[] = {kConsumerCreated, kConsumerDeleted};
constexpr std::string_view kStreamDeletedOnly[] = {kStreamDeleted};
constexpr std::string_view kConsumerDeletedOnly[] = {kConsumerDeleted};

// The rest of `subject` after one of `prefixes`, or nullopt.
template <size_t N>
std::optional<std::string_view> After(std::string_view subject,
                                      const std::string_view (&prefixes)[N]) {
  for (std::string_view prefix : prefixes) {
    if (subject.substr(0, prefix.size()) == prefix) return subject.substr(prefix.size());
  }
  return std::nullopt;
}

}  // namespace

bool AdvisoryWakes(std::string_view subject, const AdvisoryScope* scope) {
  if (subject.empty()) return true;
  if (auto stream = After(subject, kStreamPrefixes)) {
    return scope == nullptr || scope->streams.count(*stream) != 0;
  }
  if (auto rest = After(subject, kConsumerPrefixes)) {
    if (scope == nullptr) return true;
    const size_t dot = rest->find('.');
    if (dot == std::string_view::npos) return false;
    const std::string_view stream = rest->substr(0, dot);
    if (scope->streams.count(stream) == 0) return false;
    return scope->consumers.count(*rest) != 0 ||
           model::HasMeshDurableShape(stream, rest->substr(dot + 1));
  }
  return false;
}

std::optional<std::string> RepairTarget(std::string_view subject, const AdvisoryScope* scope) {
  if (scope == nullptr || !AdvisoryWakes(subject, scope)) return std::nullopt;
  if (auto stream = After(subject, kStreamPrefixes)) return std::string(*stream);
  if (auto rest = After(subject, kConsumerPrefixes)) {
    return std::string(rest->substr(0, rest->find('.')));
  }
  return std::nullopt;
}

std::optional<DeletionAdvisory> DeletionNamed(std::string_view subject) {
  DeletionAdvisory out;
  if (auto stream = After(subject, kStreamDeletedOnly)) {
    out.stream = *stream;
  } else if (auto rest = After(subject, kConsumerDeletedOnly)) {
    const size_t dot = rest->find('.');
    if (dot == std::string_view::npos || dot + 1 == rest->size()) return std::nullopt;
    out.stream = rest->substr(0, dot);
    out.consumer = true;
  } else {
    return std::nullopt;
  }
  if (out.stream.empty() || out.stream.find('.') != std::string_view::npos) return std::nullopt;
  return out;
}

}  // namespace mesh::reconciler
