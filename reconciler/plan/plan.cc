// Diff and plan (contract section 6). Pure: no I/O, no clock; the same inputs give the same
// drift and the same actions, in the same order.
//
// Scope of what is compared:
// - Streams: every desired stream; every observed stream carrying the ownership mark. A stream
//   without the mark is never acted on (a desired name present without it is reported only).
// - An owned object whose config holds a value the observer could not decode (its `problem`) is
//   reported as differing in "config", report_only; the other objects are planned as usual.
// - Consumers: only on owned streams (present with the mark, or about to be created). Ephemeral
//   consumers (empty durable name) are ignored: clients create them for their own reads and
//   they vanish on their own, so they are neither desired nor unexpected.
// - The users file: bytes against the rendering, and whether the running server loaded it.
#include "reconciler/plan/plan.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace mesh::reconciler {
namespace {

using model::ConsumerSpec;
using model::StreamSpec;
using observers::ObservedConsumer;
using observers::ObservedStream;

constexpr const char* kNoMarkNote = "not managed (no ownership mark); never touched";
constexpr const char* kStreamImmutableNote =
    "retention and storage cannot change in place (server error 10052); "
    "never deleted and recreated on its own";
constexpr const char* kConsumerImmutableNote =
    "ack, deliver and replay policy cannot change in place (server error 10012); "
    "never deleted and recreated on its own";
constexpr const char* kNotLoadedNote = "on disk as rendered, but not loaded by the server";
constexpr const char* kUnrecoverableNote =
    " (the server holds a store under this name that it has not loaded: damaged, half-created "
    "at a crash, or still being removed; never created over it, never deleted)";

using ConsumerKey = std::pair<StreamName, ConsumerName>;

std::string ConsumerEntryName(const StreamName& stream, const ConsumerName& durable) {
  return stream.str() + "/" + durable.str();
}

std::string Join(const std::vector<std::string>& items) {
  if (items.empty()) return "(none)";
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string OrNone(const std::string& text) {
  return text.empty() ? "(none)" : text;
}

// -1 (and 0 for an age) mean "no limit" in the JetStream API.
std::string Limit(int64_t value) {
  return value < 0 ? "unlimited" : std::to_string(value);
}

std::string Duration(int64_t nanos) {
  if (nanos <= 0) return "unlimited";
  if (nanos % model::kNanosPerSecond == 0) {
    return std::to_string(nanos / model::kNanosPerSecond) + "s";
  }
  return std::to_string(nanos) + "ns";
}

std::vector<std::string> SortedUnique(std::vector<std::string> items) {
  std::sort(items.begin(), items.end());
  items.erase(std::unique(items.begin(), items.end()), items.end());
  return items;
}

// Appends a FieldDiff when wanted and found differ as shown (values that differ only in their
// spelling of "no limit" are equal). Formats only values that differ: a converged pass formats
// nothing.
template <typename T, typename Format>
void Compare(std::vector<FieldDiff>& out, const char* field, const T& wanted, const T& found,
             Format format) {
  if (wanted == found) return;
  std::string w = format(wanted), f = format(found);
  if (w != f) out.push_back({field, std::move(w), std::move(f)});
}

std::string Subjects(const std::vector<std::string>& subjects) {
  return Join(SortedUnique(subjects));
}
template <typename E>
std::string Api(E value) {
  return model::ToApi(value);
}
std::string Number(int value) {
  return std::to_string(value);
}

std::vector<FieldDiff> DiffStream(const StreamSpec& wanted, const StreamSpec& found) {
  std::vector<FieldDiff> out;
  Compare(out, "subjects", wanted.subjects, found.subjects, Subjects);
  Compare(out, "retention", wanted.retention, found.retention, Api<model::Retention>);
  Compare(out, "storage", wanted.storage, found.storage, Api<model::Storage>);
  Compare(out, "replicas", wanted.replicas, found.replicas, Number);
  Compare(out, "max_age", wanted.max_age_ns, found.max_age_ns, Duration);
  Compare(out, "max_msgs", wanted.max_msgs, found.max_msgs, Limit);
  Compare(out, "max_bytes", wanted.max_bytes, found.max_bytes, Limit);
  Compare(out, "discard", wanted.discard, found.discard, Api<model::Discard>);
  Compare(out, "description", wanted.description, found.description,
          [](const std::string& s) { return s; });
  return out;
}

std::vector<FieldDiff> DiffConsumer(const ConsumerSpec& wanted, const ConsumerSpec& found) {
  std::vector<FieldDiff> out;
  Compare(out, "filter_subject", wanted.filter_subject, found.filter_subject, OrNone);
  Compare(out, "deliver_subject", wanted.deliver_subject, found.deliver_subject, OrNone);
  Compare(out, "deliver_group", wanted.deliver_group, found.deliver_group, OrNone);
  Compare(out, "ack_policy", wanted.ack, found.ack, Api<model::AckPolicy>);
  Compare(out, "deliver_policy", wanted.deliver, found.deliver, Api<model::DeliverPolicy>);
  Compare(out, "replay_policy", wanted.replay, found.replay, Api<model::ReplayPolicy>);
  Compare(out, "ack_wait", wanted.ack_wait_ns, found.ack_wait_ns, Duration);
  Compare(out, "max_deliver", wanted.max_deliver, found.max_deliver, Limit);
  return out;
}

bool Touches(const std::vector<FieldDiff>& fields, std::initializer_list<const char*> names) {
  for (const FieldDiff& f : fields) {
    for (const char* name : names) {
      if (f.field == name) return true;
    }
  }
  return false;
}

constexpr uint32_t kUsersFileMode = 0600;

std::string Octal(uint32_t mode) {
  char text[16];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode));
  return text;
}

// Which principals' entries differ between the rendering and the file found on disk. Only
// "present" / "absent" / "differs": never a hash or any other entry content.
std::vector<FieldDiff> DiffUsersFile(const model::RenderedUsersFile& rendered,
                                     const std::string& found_bytes) {
  const std::map<UserName, std::string> found = model::SplitUserBlocks(found_bytes);
  if (found.empty()) {
    return {{"file", "as rendered", "unparseable (no user entry recognised)"}};
  }
  std::set<UserName> users;
  for (const auto& [user, span] : rendered.entries) users.insert(user);
  for (const auto& [user, block] : found) users.insert(user);
  std::vector<FieldDiff> out;
  for (const UserName& user : users) {
    const std::optional<std::string_view> w = rendered.Block(user);
    auto f = found.find(user);
    const std::string field = "principal " + user.str();
    if (!w) {
      out.push_back({field, "absent", "present"});
    } else if (f == found.end()) {
      out.push_back({field, "present", "absent"});
    } else if (*w != f->second) {
      out.push_back({field, "present", "differs"});
    }
  }
  if (out.empty()) out.push_back({"file", "as rendered", "differs outside the user entries"});
  return out;
}

// Pointers to `items` sorted by `key` (a comparable value such as a tuple of references), for
// lookups that neither copy names nor allocate per object: a converged pass over thousands of
// consumers stays cheap. The items must outlive the index.
template <typename T, typename KeyFn>
class SortedIndex {
 public:
  SortedIndex(const std::vector<T>& items, KeyFn key) : key_(key) {
    sorted_.reserve(items.size());
    for (const T& item : items) sorted_.push_back(&item);
    std::sort(sorted_.begin(), sorted_.end(),
              [this](const T* a, const T* b) { return key_(*a) < key_(*b); });
  }
  template <typename K>
  const T* Find(const K& wanted) const {
    auto it = std::lower_bound(sorted_.begin(), sorted_.end(), wanted,
                               [this](const T* item, const K& k) { return key_(*item) < k; });
    return it != sorted_.end() && !(wanted < key_(**it)) ? *it : nullptr;
  }
  const std::vector<const T*>& sorted() const { return sorted_; }

 private:
  KeyFn key_;
  std::vector<const T*> sorted_;
};

auto StreamKey(const StreamSpec& s) {
  return std::tie(s.name);
}
auto ObservedStreamKey(const ObservedStream& s) {
  return std::tie(s.config.name);
}
auto ConsumerKeyOf(const ConsumerSpec& c) {
  return std::tie(c.stream, c.durable);
}
auto ObservedConsumerKey(const ObservedConsumer& c) {
  return std::tie(c.config.stream, c.config.durable);
}

class Planner {
 public:
  Planner(const model::DesiredState& desired, const model::RenderedUsersFile& rendered,
          const observers::ObservedState& observed, const PlanOptions& options)
      : desired_(desired), rendered_(rendered), observed_(observed), options_(options) {}

  PlanResult Run() {
    // The monitoring endpoint counts the cluster exactly; without it the bus shows a lower
    // bound (the largest stream group), and the note says so.
    const int cluster = observers::JetStreamClusterSize(observed_);
    const bool exact = observed_.server.jetstream_cluster_size > 0;
    unsatisfiable_ = cluster > 0 && desired_.replicas > cluster;
    if (unsatisfiable_) {
      unsatisfiable_note_ =
          "records ask for " + std::to_string(desired_.replicas) + " replicas, the JetStream " +
          (exact ? "cluster has " : "bus shows ") + std::to_string(cluster) + " server" +
          (cluster == 1 ? "" : "s") +
          (exact ? "" : " (a lower bound: give --monitor to count the cluster's servers)");
      out_.problems.push_back(unsatisfiable_note_);
    }
    if (!options_.users_file_path.empty()) PlanUsersFile();
    PlanStreams();
    PlanConsumers();
    AppendUndescribedProblem();
    AppendActions();
    return std::move(out_);
  }

 private:
  void PlanUsersFile() {
    const observers::ObservedUsersFile& file = observed_.users_file;
    DriftEntry entry;
    entry.kind = ObjectKind::kUsersFile;
    entry.name = options_.users_file_path;
    entry.remedy = Remedy::kRewrite;
    switch (file.state) {
      case observers::ObservedUsersFile::State::kAbsent:
        entry.state = DriftState::kMissing;
        break;
      case observers::ObservedUsersFile::State::kUnreadable:
        entry.state = DriftState::kDiffers;
        entry.fields.push_back({"file", "readable", "unreadable: " + file.error});
        break;
      case observers::ObservedUsersFile::State::kPresent:
        if (file.kind == observers::ObservedUsersFile::Kind::kSymlink) {
          entry.state = DriftState::kDiffers;
          entry.fields.push_back({"file", "regular file", "symbolic link"});
          break;
        }
        if (file.bytes != rendered_.bytes) entry.fields = DiffUsersFile(rendered_, file.bytes);
        // The hashes are secrets: only the reconciler (and nats-server, running as the same
        // user) may read them.
        if (file.mode != kUsersFileMode) {
          entry.fields.push_back({"mode", Octal(kUsersFileMode), Octal(file.mode)});
        }
        if (options_.users_file_owner_uid && file.owner_uid != *options_.users_file_owner_uid) {
          entry.fields.push_back({"owner", "uid " + std::to_string(*options_.users_file_owner_uid),
                                  "uid " + std::to_string(file.owner_uid)});
        }
        if (!entry.fields.empty()) {
          entry.state = DriftState::kDiffers;
        } else if (NotLoaded()) {
          entry.state = DriftState::kDiffers;
          entry.fields.push_back({"server", "loaded", "not loaded by the server"});
          entry.remedy = Remedy::kReload;
          entry.note = kNotLoadedNote;
        } else {
          return;
        }
        break;
    }
    Action action;
    action.kind =
        entry.remedy == Remedy::kReload ? ActionKind::kReloadServer : ActionKind::kWriteUsersFile;
    action.name = entry.name;
    if (action.kind == ActionKind::kWriteUsersFile) action.users_file_bytes = rendered_.bytes;
    users_file_actions_.push_back(std::move(action));
    out_.drift.push_back(std::move(entry));
  }

  bool NotLoaded() const {
    const observers::ObservedServer& server = observed_.server;
    return server.reachable && server.config_load_time_unix_ns > 0 &&
           server.config_load_time_unix_ns < observed_.users_file.mtime_unix_ns;
  }

  void PlanStreams() {
    const SortedIndex found(observed_.jetstream.streams, ObservedStreamKey);
    const SortedIndex wanted(desired_.streams, StreamKey);
    const std::string mark = model::OwnershipMark(desired_.mesh);
    // Desired and unexpected entries are merged in name order.
    std::map<StreamName, DriftEntry> entries;

    for (const StreamSpec& spec : desired_.streams) {
      const ObservedStream* observed = found.Find(StreamKey(spec));
      const observers::ObjectHealth* health = Health(spec.name, ConsumerName());
      if (const observers::UndescribedObject* u = Undescribed(spec.name, ConsumerName())) {
        // It exists, but no leader says what it holds: neither created nor compared, and its
        // consumers are left alone with it (not in owned_streams_).
        entries.emplace(spec.name, UndescribedEntry(ObjectKind::kStream, spec.name.str(), *u));
        NoteUndescribed(spec.name.str());
        continue;
      }
      if (observed == nullptr && health != nullptr) {
        // The server holds a store under this name that it has not loaded: creating the name
        // now would write into it (or into a folder being removed under the new stream).
        DriftEntry entry = Entry(ObjectKind::kStream, spec.name.str(), DriftState::kUnrecoverable,
                                 Remedy::kReportOnly);
        entry.note = health->error + kUnrecoverableNote;
        entries.emplace(spec.name, std::move(entry));
        continue;
      }
      if (observed == nullptr) {
        missing_streams_.insert(spec.name);
        owned_streams_.insert(spec.name);
        DriftEntry entry =
            Entry(ObjectKind::kStream, spec.name.str(), DriftState::kMissing, Remedy::kCreate);
        if (unsatisfiable_) {
          MarkUnsatisfiable(entry);
        } else {
          stream_creates_.push_back(StreamAction(ActionKind::kCreateStream, spec));
        }
        entries.emplace(spec.name, std::move(entry));
        continue;
      }
      const StreamSpec& have = observed->config;
      std::vector<FieldDiff> fields = DiffStream(spec, have);
      if (have.description != mark) {
        DriftEntry entry =
            Entry(ObjectKind::kStream, spec.name.str(), DriftState::kDiffers, Remedy::kReportOnly);
        entry.fields = std::move(fields);
        entry.note = kNoMarkNote;
        entries.emplace(spec.name, std::move(entry));
        continue;
      }
      owned_streams_.insert(spec.name);
      if (!observed->problem.empty()) {
        entries.emplace(spec.name,
                        UnreadableEntry(ObjectKind::kStream, spec.name.str(), observed->problem));
        continue;
      }
      if (fields.empty()) {
        if (health != nullptr) entries.emplace(spec.name, UnhealthyEntry(spec.name.str(), *health));
        continue;
      }
      DriftEntry entry =
          Entry(ObjectKind::kStream, spec.name.str(), DriftState::kDiffers, Remedy::kUpdateInPlace);
      if (health != nullptr) entry.note = "the server reports: " + health->error;
      const bool immutable = Touches(fields, {"retention", "storage"});
      entry.fields = std::move(fields);
      if (immutable) {
        entry.remedy = Remedy::kReportOnly;
        entry.note = kStreamImmutableNote;
      } else if (unsatisfiable_) {
        MarkUnsatisfiable(entry);
      } else {
        stream_updates_.push_back(StreamAction(ActionKind::kUpdateStream, spec));
        stream_updates_.back().observed_config = observed->raw_config;
      }
      entries.emplace(spec.name, std::move(entry));
    }

    for (const ObservedStream* observed : found.sorted()) {
      const ObservedStream& s = *observed;
      if (wanted.Find(ObservedStreamKey(s)) != nullptr || s.config.description != mark) continue;
      owned_streams_.insert(s.config.name);
      DriftEntry entry = UnexpectedEntry(ObjectKind::kStream, s.config.name.str());
      if (entry.remedy == Remedy::kPrune) {
        deleted_streams_.insert(s.config.name);
        stream_deletes_.push_back(DeleteStreamAction(s.config.name));
      }
      entries.emplace(s.config.name, std::move(entry));
    }
    for (auto& [name, entry] : entries) out_.drift.push_back(std::move(entry));
  }

  // How many more consumers each owned stream may hold, where a limit applies: the stream's
  // own max_consumers, else the server's default (2.15 on). Every consumer the server lists on
  // it counts, ephemerals included, as the server counts them.
  struct Room {
    int64_t limit = 0;
    bool own = false;  // the stream's max_consumers, not the server's default
    int64_t left = 0;
    int64_t over = 0;  // missing consumers that do not fit
  };
  std::map<StreamName, Room> ConsumerRoom() const {
    std::map<StreamName, int64_t> held;
    for (const ObservedConsumer& c : observed_.jetstream.consumers) ++held[c.config.stream];
    std::map<StreamName, int64_t> own_limit;
    for (const ObservedStream& s : observed_.jetstream.streams) {
      own_limit[s.config.name] = s.max_consumers;
    }
    std::map<StreamName, Room> room;
    for (const StreamName& stream : owned_streams_) {
      const auto own = own_limit.find(stream);
      Room r;
      r.own = own != own_limit.end() && own->second > 0;
      r.limit = r.own ? own->second : observed_.server.default_max_consumers;
      if (r.limit <= 0) continue;
      const auto h = held.find(stream);
      r.left = r.limit - (h == held.end() ? 0 : h->second);
      room.emplace(stream, r);
    }
    return room;
  }

  static std::string LimitName(const Room& r) {
    return r.own ? "its max_consumers" : "the server's jetstream limits default_max_consumers";
  }

  void PlanConsumers() {
    const SortedIndex found(observed_.jetstream.consumers, ObservedConsumerKey);
    const SortedIndex wanted(desired_.consumers, ConsumerKeyOf);
    std::map<ConsumerKey, DriftEntry> entries;
    std::map<StreamName, Room> room = ConsumerRoom();

    for (const ConsumerSpec& spec : desired_.consumers) {
      if (owned_streams_.count(spec.stream) == 0) continue;  // its stream is not ours to touch
      const ObservedConsumer* observed = found.Find(ConsumerKeyOf(spec));
      if (const observers::UndescribedObject* u = Undescribed(spec.stream, spec.durable)) {
        entries.emplace(ConsumerKey(spec.stream, spec.durable),
                        UndescribedEntry(ObjectKind::kConsumer,
                                         ConsumerEntryName(spec.stream, spec.durable), *u));
        NoteUndescribed(ConsumerEntryName(spec.stream, spec.durable));
        continue;
      }
      if (observed == nullptr) {
        DriftEntry entry =
            Entry(ObjectKind::kConsumer, ConsumerEntryName(spec.stream, spec.durable),
                  DriftState::kMissing, Remedy::kCreate);
        auto limited = room.find(spec.stream);
        if (unsatisfiable_ && missing_streams_.count(spec.stream) != 0) {
          MarkUnsatisfiable(entry);
        } else if (limited != room.end() && limited->second.left <= 0) {
          // The server would refuse it (10026): reported, not sent, so that a pass is not a
          // thousand refusals and the consumers that fit are still created.
          Room& r = limited->second;
          ++r.over;
          entry.remedy = Remedy::kUnsatisfiable;
          entry.note = "stream " + spec.stream.str() + " may hold " + std::to_string(r.limit) +
                       " consumers (" + LimitName(r) + ") and is full";
        } else {
          if (limited != room.end()) --limited->second.left;
          consumer_creates_.push_back(ConsumerAction(ActionKind::kCreateConsumer, spec));
        }
        entries.emplace(ConsumerKey(spec.stream, spec.durable), std::move(entry));
        continue;
      }
      if (!observed->problem.empty()) {
        entries.emplace(
            ConsumerKey(spec.stream, spec.durable),
            UnreadableEntry(ObjectKind::kConsumer, ConsumerEntryName(spec.stream, spec.durable),
                            observed->problem));
        continue;
      }
      std::vector<FieldDiff> fields = DiffConsumer(spec, observed->config);
      if (fields.empty()) {
        if (const observers::ObjectHealth* health = Health(spec.stream, spec.durable)) {
          DriftEntry entry = UnhealthyEntry(ConsumerEntryName(spec.stream, spec.durable), *health);
          entry.kind = ObjectKind::kConsumer;
          entries.emplace(ConsumerKey(spec.stream, spec.durable), std::move(entry));
        }
        continue;
      }
      DriftEntry entry = Entry(ObjectKind::kConsumer, ConsumerEntryName(spec.stream, spec.durable),
                               DriftState::kDiffers, Remedy::kUpdateInPlace);
      const bool immutable = Touches(fields, {"ack_policy", "deliver_policy", "replay_policy"});
      entry.fields = std::move(fields);
      if (immutable) {
        entry.remedy = Remedy::kReportOnly;
        entry.note = kConsumerImmutableNote;
      } else {
        consumer_updates_.push_back(ConsumerAction(ActionKind::kUpdateConsumer, spec));
        consumer_updates_.back().observed_config = observed->raw_config;
      }
      entries.emplace(ConsumerKey(spec.stream, spec.durable), std::move(entry));
    }

    for (const ObservedConsumer* observed : found.sorted()) {
      const ConsumerSpec& c = observed->config;
      // Ephemeral consumers (no durable name) are ignored: see the file comment.
      if (c.durable.empty() || owned_streams_.count(c.stream) == 0 ||
          wanted.Find(ObservedConsumerKey(*observed)) != nullptr) {
        continue;
      }
      const ConsumerKey key(c.stream, c.durable);
      DriftEntry entry =
          UnexpectedEntry(ObjectKind::kConsumer, ConsumerEntryName(key.first, key.second));
      // Deleting the stream deletes its consumers: no separate action.
      if (entry.remedy == Remedy::kPrune && deleted_streams_.count(key.first) == 0) {
        consumer_deletes_.push_back(DeleteConsumerAction(key.first, key.second));
      }
      entries.emplace(key, std::move(entry));
    }
    for (auto& [key, entry] : entries) out_.drift.push_back(std::move(entry));
    for (const auto& [stream, r] : room) {
      if (r.over == 0) continue;
      out_.problems.push_back(
          "stream " + stream.str() + " may hold " + std::to_string(r.limit) + " consumers (" +
          LimitName(r) + "); " + std::to_string(r.over) +
          " the records derive do not fit and are not created: raise that limit");
    }
  }

  void AppendActions() {
    for (auto* list : {&users_file_actions_, &stream_creates_, &stream_updates_, &stream_deletes_,
                       &consumer_creates_, &consumer_updates_, &consumer_deletes_}) {
      for (Action& action : *list) out_.actions.push_back(std::move(action));
    }
  }

  // What the server's /healthz says of this stream (empty `durable`) or consumer, if anything.
  // Matched by name in any account: the reconciler does not ask which account it is in, and a
  // same-named object of another account costs at most a report line.
  const observers::ObjectHealth* Health(const StreamName& stream,
                                        const ConsumerName& durable) const {
    const auto kind = durable.empty() ? observers::ObjectHealth::Kind::kStream
                                      : observers::ObjectHealth::Kind::kConsumer;
    for (const observers::ObjectHealth& h : observed_.server.unhealthy) {
      if (h.kind == kind && h.stream == stream.str() && h.consumer == durable.str()) return &h;
    }
    return nullptr;
  }

  // What a clustered server's list names in "missing" (observers::UndescribedObject).
  const observers::UndescribedObject* Undescribed(const StreamName& stream,
                                                  const ConsumerName& consumer) const {
    for (const observers::UndescribedObject& u : observed_.jetstream.undescribed) {
      if (u.stream == stream && u.consumer == consumer) return &u;
    }
    return nullptr;
  }

  void NoteUndescribed(const std::string& name) {
    if (out_.undescribed++ == 0) first_undescribed_ = name;
  }
  // One problem for all of them (an election can leave hundreds undescribed at once).
  void AppendUndescribedProblem() {
    if (out_.undescribed == 0) return;
    out_.problems.push_back(std::to_string(out_.undescribed) +
                            " of the mesh's streams and consumers were not described by their "
                            "leaders in time (first: " +
                            first_undescribed_ +
                            "): not compared, nor the consumers of such a stream; a later pass "
                            "compares them");
  }

  // Unhealthy in the report's terms: present, and nothing the reconciler can do about it now.
  static DriftEntry UndescribedEntry(ObjectKind kind, std::string name,
                                     const observers::UndescribedObject& u) {
    DriftEntry entry = Entry(kind, std::move(name), DriftState::kUnhealthy, Remedy::kReportOnly);
    entry.note = u.reason + "; left alone until a leader describes it";
    return entry;
  }

  static DriftEntry UnhealthyEntry(std::string name, const observers::ObjectHealth& health) {
    DriftEntry entry =
        Entry(ObjectKind::kStream, std::move(name), DriftState::kUnhealthy, Remedy::kReportOnly);
    entry.note = health.error;
    return entry;
  }

  static DriftEntry Entry(ObjectKind kind, std::string name, DriftState state, Remedy remedy) {
    DriftEntry entry;
    entry.kind = kind;
    entry.name = std::move(name);
    entry.state = state;
    entry.remedy = remedy;
    return entry;
  }

  // An owned object with a value this build cannot read: reported with what could not be read,
  // never updated (an update would rewrite the field it does not understand).
  static DriftEntry UnreadableEntry(ObjectKind kind, std::string name, const std::string& problem) {
    DriftEntry entry = Entry(kind, std::move(name), DriftState::kDiffers, Remedy::kReportOnly);
    entry.fields.push_back({"config", "readable", problem});
    entry.note = "the server's config holds a value this reconciler does not know; left as it is";
    return entry;
  }

  DriftEntry UnexpectedEntry(ObjectKind kind, std::string name) const {
    const bool prune = options_.prune == Prune::kYes;
    DriftEntry entry = Entry(kind, std::move(name), DriftState::kUnexpected,
                             prune ? Remedy::kPrune : Remedy::kLeave);
    entry.note = kind == ObjectKind::kStream
                     ? "marked as ours, not derived from the records"
                     : "durable consumer on a managed stream, not derived from the records";
    if (!prune) entry.note += "; left alone (delete with --prune)";
    return entry;
  }

  void MarkUnsatisfiable(DriftEntry& entry) const {
    entry.remedy = Remedy::kUnsatisfiable;
    entry.note = unsatisfiable_note_;
  }

  static Action StreamAction(ActionKind kind, const StreamSpec& spec) {
    Action action;
    action.kind = kind;
    action.name = spec.name.str();
    action.stream = spec;
    return action;
  }

  static Action ConsumerAction(ActionKind kind, const ConsumerSpec& spec) {
    Action action;
    action.kind = kind;
    action.name = ConsumerEntryName(spec.stream, spec.durable);
    action.consumer = spec;
    return action;
  }

  const model::DesiredState& desired_;
  const model::RenderedUsersFile& rendered_;
  const observers::ObservedState& observed_;
  const PlanOptions& options_;

  bool unsatisfiable_ = false;
  std::string unsatisfiable_note_;
  std::string first_undescribed_;
  std::set<StreamName> owned_streams_;    // present with the mark, or desired and missing
  std::set<StreamName> missing_streams_;  // desired and absent
  std::set<StreamName> deleted_streams_;  // unexpected and pruned
  std::vector<Action> users_file_actions_, stream_creates_, stream_updates_, stream_deletes_,
      consumer_creates_, consumer_updates_, consumer_deletes_;
  PlanResult out_;
};

}  // namespace

const char* ToString(ObjectKind v) {
  return kObjectKindNames.Name(v);
}

const char* ToString(DriftState v) {
  return kDriftStateNames.Name(v);
}

const char* ToString(Remedy v) {
  return kRemedyNames.Name(v);
}

const char* ToString(ActionKind v) {
  return kActionKindNames.Name(v);
}

ObjectKind KindOf(ActionKind v) {
  switch (v) {
    case ActionKind::kWriteUsersFile:
    case ActionKind::kReloadServer:
      return ObjectKind::kUsersFile;
    case ActionKind::kCreateStream:
    case ActionKind::kUpdateStream:
    case ActionKind::kDeleteStream:
      return ObjectKind::kStream;
    case ActionKind::kCreateConsumer:
    case ActionKind::kUpdateConsumer:
    case ActionKind::kDeleteConsumer:
      return ObjectKind::kConsumer;
  }
  return ObjectKind::kStream;
}

bool IsUpdate(ActionKind v) {
  return v == ActionKind::kUpdateStream || v == ActionKind::kUpdateConsumer;
}

Action DeleteStreamAction(const StreamName& stream) {
  Action action;
  action.kind = ActionKind::kDeleteStream;
  action.name = stream.str();
  action.target_stream = stream;
  return action;
}

Action DeleteConsumerAction(const StreamName& stream, const ConsumerName& consumer) {
  Action action;
  action.kind = ActionKind::kDeleteConsumer;
  action.name = ConsumerEntryName(stream, consumer);
  action.target_stream = stream;
  action.target_consumer = consumer;
  return action;
}

const char* VerbOf(ActionKind v) {
  switch (v) {
    case ActionKind::kWriteUsersFile:
      return "write";
    case ActionKind::kReloadServer:
      return "reload";
    case ActionKind::kCreateStream:
    case ActionKind::kCreateConsumer:
      return "create";
    case ActionKind::kUpdateStream:
    case ActionKind::kUpdateConsumer:
      return "update";
    case ActionKind::kDeleteStream:
    case ActionKind::kDeleteConsumer:
      return "delete";
  }
  return "?";
}

PlanResult Plan(const model::DesiredState& desired, const model::RenderedUsersFile& rendered,
                const observers::ObservedState& observed, const PlanOptions& options) {
  return Planner(desired, rendered, observed, options).Run();
}

PlanResult PlanStreams(const model::DesiredState& desired, const observers::ObservedState& observed,
                       const std::set<StreamName>& streams, const PlanOptions& options) {
  // Only what the plan of these streams reads: no principals, no users file (on a large mesh
  // thousands of entries and the whole file, copied for nothing).
  model::DesiredState part;
  part.mesh = desired.mesh;
  part.account = desired.account;
  part.replicas = desired.replicas;
  std::copy_if(desired.streams.begin(), desired.streams.end(), std::back_inserter(part.streams),
               [&](const model::StreamSpec& s) { return streams.count(s.name) != 0; });
  std::copy_if(desired.consumers.begin(), desired.consumers.end(),
               std::back_inserter(part.consumers),
               [&](const model::ConsumerSpec& c) { return streams.count(c.stream) != 0; });
  observers::ObservedState seen;
  seen.server = observed.server;
  seen.jetstream.cluster_size = observed.jetstream.cluster_size;
  const observers::ObservedJetStream& js = observed.jetstream;
  std::copy_if(
      js.streams.begin(), js.streams.end(), std::back_inserter(seen.jetstream.streams),
      [&](const observers::ObservedStream& s) { return streams.count(s.config.name) != 0; });
  std::copy_if(
      js.consumers.begin(), js.consumers.end(), std::back_inserter(seen.jetstream.consumers),
      [&](const observers::ObservedConsumer& c) { return streams.count(c.config.stream) != 0; });
  PlanOptions without_file = options;
  without_file.users_file_path.clear();
  return Plan(part, model::RenderedUsersFile{}, seen, without_file);
}

}  // namespace mesh::reconciler
