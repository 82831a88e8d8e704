// Strong names (after redpanda's named_type): a stream name cannot be passed where a consumer
// or user name is expected. Values, ordered, hashable; no validation here (model/records.cc
// validates the names that come from the records).
#pragma once

#include <compare>
#include <functional>
#include <string>
#include <utility>

#include "model/enum_names.h"

namespace mesh {

template <typename Tag>
class NamedString {
 public:
  NamedString() = default;
  explicit NamedString(std::string value) : value_(std::move(value)) {}
  const std::string& str() const { return value_; }
  bool empty() const { return value_.empty(); }
  auto operator<=>(const NamedString&) const = default;
  bool operator==(const NamedString&) const = default;

 private:
  std::string value_;
};

using StreamName = NamedString<struct StreamNameTag>;
using ConsumerName = NamedString<struct ConsumerNameTag>;  // a durable name; never contains '.'
using UserName = NamedString<struct UserNameTag>;

// Enums, not bools, for flags (after redpanda's bool_class).
enum class Prune { kNo, kYes };
enum class ApplyMode { kApply, kObserveOnly };  // kObserveOnly: plan, hold, or a dry run
inline constexpr EnumNames<ApplyMode, 2> kApplyModeNames{{{
    {ApplyMode::kApply, "apply"},
    {ApplyMode::kObserveOnly, "observe_only"},
}}};
static_assert(kApplyModeNames.Dense());

}  // namespace mesh

template <typename Tag>
struct std::hash<mesh::NamedString<Tag>> {
  size_t operator()(const mesh::NamedString<Tag>& n) const noexcept {
    return std::hash<std::string>()(n.str());
  }
};
