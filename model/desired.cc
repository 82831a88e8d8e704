// Derivation of the desired bus state (contract sections 2 to 4). Pure: no I/O, no clock.
#include "model/desired.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace mesh::model {
namespace {

constexpr std::string_view kControlStream = "CONTROL";
constexpr std::string_view kDeclStream = "DECL";
constexpr std::string_view kEventsStream = "EVENTS";
constexpr std::string_view kSeatStreamPrefix = "SEAT_";

std::string SeatStream(const std::string& seat) {
  return std::string(kSeatStreamPrefix) + seat;
}

// The subjects a principal's clients answer on: every principal's own inbox and deliveries.
std::string InboxSubject(const std::string& user) {
  return "_INBOX." + user + ".>";
}
std::string DeliveriesSubject(const std::string& user) {
  return "mesh.in." + user + ".>";
}
std::string WorkSubject(const std::string& seat, const std::string& kind) {
  return "mesh.work." + seat + "." + kind;
}
std::string EventSubject(const std::string& seat, const std::string& event) {
  return "mesh.evt." + seat + "." + event;
}
std::string SeatQueueSubject(const std::string& seat) {
  return "mesh.q." + seat;
}

// Sorts a permission list and drops duplicates (contract section 4).
void SortUnique(std::vector<std::string>& list) {
  std::sort(list.begin(), list.end());
  list.erase(std::unique(list.begin(), list.end()), list.end());
}

class Deriver {
 public:
  explicit Deriver(const Records& records) : records_(records) {
    for (const Module& module : records.modules) {
      for (const Seat& seat : module.seats) seats_.emplace(seat.name, &seat);
    }
    for (const Role& role : records.roles) seats_.emplace(role.seat.name, &role.seat);
  }

  DesiredState Run(const ReconcilerIdentity& reconciler) {
    DesiredState out;
    out.mesh = records_.mesh;
    out.account = records_.bus.account;
    out.replicas = records_.bus.replicas;
    DeriveStreams(out.streams);
    DeriveConsumers(out.consumers);
    DerivePrincipals(reconciler, out);
    // Kept for the process's life: no room beyond what they hold (at ten times the Large mesh
    // the consumers' doubling left 5 MiB unused).
    out.streams.shrink_to_fit();
    out.consumers.shrink_to_fit();
    out.principals.shrink_to_fit();
    return out;
  }

 private:
  StreamSpec BaseStream(std::string_view name, std::string subject, Retention retention) const {
    StreamSpec spec;
    spec.name = StreamName(std::string(name));
    spec.subjects = {std::move(subject)};
    spec.retention = retention;
    spec.storage = Storage::kFile;
    spec.replicas = records_.bus.replicas;
    spec.max_age_ns = 0;
    spec.max_msgs = kUnlimited;
    spec.max_bytes = kUnlimited;
    spec.discard = Discard::kOld;
    spec.description = OwnershipMark(records_.mesh);
    return spec;
  }

  // Every seat, module seats first, then roles (the caller sorts).
  template <typename Fn>
  void ForEachSeat(Fn&& fn) const {
    for (const Module& module : records_.modules) {
      for (const Seat& seat : module.seats) fn(seat);
    }
    for (const Role& role : records_.roles) fn(role.seat);
  }

  void DeriveStreams(std::vector<StreamSpec>& streams) const {
    streams.push_back(BaseStream(kControlStream, "mesh.control.>", Retention::kWorkQueue));
    streams.push_back(BaseStream(kDeclStream, "mesh.decl.*", Retention::kWorkQueue));
    StreamSpec events = BaseStream(kEventsStream, "mesh.evt.>", Retention::kLimits);
    events.max_age_ns = records_.bus.events_max_age_seconds * kNanosPerSecond;
    streams.push_back(std::move(events));
    ForEachSeat([&](const Seat& seat) {
      streams.push_back(BaseStream(SeatStream(seat.name), "mesh.work." + seat.name + ".*",
                                   Retention::kWorkQueue));
    });
    std::sort(streams.begin(), streams.end(),
              [](const StreamSpec& a, const StreamSpec& b) { return a.name < b.name; });
    streams.erase(
        std::unique(streams.begin(), streams.end(),
                    [](const StreamSpec& a, const StreamSpec& b) { return a.name == b.name; }),
        streams.end());
  }

  static ConsumerSpec Consumer(const ConsumerId& id, std::string filter, std::string deliver,
                               std::string group, int64_t max_deliver) {
    ConsumerSpec spec;
    spec.stream = id.stream;
    spec.durable = id.durable;
    spec.filter_subject = std::move(filter);
    spec.deliver_subject = std::move(deliver);
    spec.deliver_group = std::move(group);
    spec.max_deliver = max_deliver;
    return spec;
  }

  static ConsumerSpec EventsConsumer(const std::string& follower, const FollowRef& follow) {
    return Consumer(EventConsumer(follower, follow), EventSubject(follow.seat, follow.event),
                    "mesh.in." + follower + ".ev." + follow.seat + "." + follow.event, "",
                    kEventsMaxDeliver);
  }

  void DeriveConsumers(std::vector<ConsumerSpec>& consumers) const {
    const std::string& controller = records_.controller.user;
    consumers.push_back(Consumer(ControlConsumer(), "mesh.control.>",
                                 "mesh.in." + controller + ".control", "", kUnlimited));
    for (const Node& node : records_.nodes) {
      consumers.push_back(Consumer(DeclConsumer(node.name), "mesh.decl." + node.name,
                                   "mesh.in." + node.name + ".decl", "", kUnlimited));
    }
    ForEachSeat([&](const Seat& seat) {
      consumers.push_back(Consumer(SeatWorker(seat.name), "", SeatQueueSubject(seat.name),
                                   seat.name, kSeatMaxDeliver));
    });
    for (const FollowRef& follow : records_.controller.follows) {
      consumers.push_back(EventsConsumer(controller, follow));
    }
    for (const Module& module : records_.modules) {
      for (const FollowRef& follow : module.follows) {
        consumers.push_back(EventsConsumer(module.name, follow));
      }
    }
    auto key = [](const ConsumerSpec& c) { return std::tie(c.stream, c.durable); };
    std::sort(consumers.begin(), consumers.end(),
              [&](const ConsumerSpec& a, const ConsumerSpec& b) { return key(a) < key(b); });
    // A follows entry listed twice derives one consumer.
    consumers.erase(
        std::unique(consumers.begin(), consumers.end(),
                    [&](const ConsumerSpec& a, const ConsumerSpec& b) { return key(a) == key(b); }),
        consumers.end());
  }

  // Principals are collected unsorted, with duplicates in their lists, and put in order once.
  class Principals {
   public:
    Principal& Add(const std::string& user, PrincipalKind kind, const Credential& credential) {
      auto [it, added] = index_.try_emplace(user, list_.size());
      if (added) list_.emplace_back();
      Principal& p = list_[it->second];
      p.user = UserName(user);
      p.kind = kind;
      p.credential = credential;
      return p;
    }
    Principal* Find(const std::string& user) {
      auto it = index_.find(user);
      return it == index_.end() ? nullptr : &list_[it->second];
    }
    std::vector<Principal> Sorted() && {
      for (Principal& p : list_) {
        SortUnique(p.publish_allow);
        SortUnique(p.subscribe_allow);
      }
      std::sort(list_.begin(), list_.end(),
                [](const Principal& a, const Principal& b) { return a.user < b.user; });
      return std::move(list_);
    }

   private:
    std::vector<Principal> list_;
    std::unordered_map<std::string, size_t> index_;
  };

  // A principal of the records: every one subscribes its inbox and its deliveries.
  static Principal& AddPrincipal(Principals& principals, const std::string& user,
                                 PrincipalKind kind, const Credential& credential) {
    Principal& p = principals.Add(user, kind, credential);
    p.subscribe_allow.push_back(InboxSubject(user));
    p.subscribe_allow.push_back(DeliveriesSubject(user));
    return p;
  }

  // What the owner of `seat` (its module, or each holder of the role) may do.
  void GrantSeatOwner(Principal& p, const Seat& seat) const {
    p.publish_allow.push_back(SeatWorker(seat.name).AckPermission());
    for (const std::string& event : seat.emits) {
      p.publish_allow.push_back(EventSubject(seat.name, event));
    }
    for (const std::string& target : seat.uses) GrantSubmit(p, target);
    p.subscribe_allow.push_back(SeatQueueSubject(seat.name));
  }

  void GrantSubmit(Principal& p, const std::string& target) const {
    auto it = seats_.find(target);
    if (it == seats_.end()) return;  // validation guarantees it exists
    for (const std::string& kind : it->second->accepts) {
      p.publish_allow.push_back(WorkSubject(target, kind));
    }
  }

  static void GrantFollows(Principal& p, const std::vector<FollowRef>& follows) {
    for (const FollowRef& follow : follows) {
      p.publish_allow.push_back(EventConsumer(p.user.str(), follow).AckPermission());
    }
  }

  void DerivePrincipals(const ReconcilerIdentity& reconciler, DesiredState& out) const {
    Principals principals;

    const Controller& controller = records_.controller;
    Principal& c = AddPrincipal(principals, controller.user, PrincipalKind::kController,
                                controller.credential);
    for (const Node& node : records_.nodes) c.publish_allow.push_back("mesh.decl." + node.name);
    c.publish_allow.push_back(ControlConsumer().AckPermission());
    for (const std::string& target : controller.submits_to) GrantSubmit(c, target);
    GrantFollows(c, controller.follows);

    for (const Node& node : records_.nodes) {
      Principal& n = AddPrincipal(principals, node.name, PrincipalKind::kNode, node.credential);
      n.publish_allow.push_back("mesh.control." + node.name + ".>");
      n.publish_allow.push_back(DeclConsumer(node.name).AckPermission());
    }
    for (const Role& role : records_.roles) {
      for (const std::string& holder : role.holders) {
        if (Principal* node = principals.Find(holder)) GrantSeatOwner(*node, role.seat);
      }
    }
    for (const Module& module : records_.modules) {
      Principal& m =
          AddPrincipal(principals, module.name, PrincipalKind::kModule, module.credential);
      m.publish_allow.push_back("mesh.control." + module.name + ".>");
      for (const Seat& seat : module.seats) GrantSeatOwner(m, seat);
      GrantFollows(m, module.follows);
    }

    // The reconciler is not a principal of the records: it has exactly the rights of its row
    // (the JetStream API and its answers, and the advisories), no mesh.in deliveries.
    Principal& r =
        principals.Add(reconciler.user.str(), PrincipalKind::kReconciler, reconciler.credential);
    r.publish_allow = {"$JS.API.>"};
    r.publish_allow.insert(r.publish_allow.end(), reconciler.extra_publish.begin(),
                           reconciler.extra_publish.end());
    r.subscribe_allow = {InboxSubject(reconciler.user.str()), "$JS.EVENT.ADVISORY.>"};

    out.principals = std::move(principals).Sorted();
    for (const Principal& p : out.principals) {
      if (p.credential.kind == Credential::Kind::kNone) out.without_credential.push_back(p.user);
    }
  }

  const Records& records_;
  std::map<std::string, const Seat*> seats_;
};

}  // namespace

const char* ToApi(Retention v) {
  return kRetentionNames.Name(v);
}

const char* ToApi(Storage v) {
  return kStorageNames.Name(v);
}

const char* ToApi(Discard v) {
  return kDiscardNames.Name(v);
}

const char* ToApi(AckPolicy v) {
  return kAckPolicyNames.Name(v);
}

const char* ToApi(DeliverPolicy v) {
  return kDeliverPolicyNames.Name(v);
}

const char* ToApi(ReplayPolicy v) {
  return kReplayPolicyNames.Name(v);
}

const char* ToString(PrincipalKind kind) {
  return kPrincipalKindNames.Name(kind);
}

std::string OwnershipMark(const std::string& mesh) {
  return "mesh " + mesh + ": managed by mesh-reconciler";
}

std::string ConsumerId::AckPermission() const {
  return "$JS.ACK." + stream.str() + "." + durable.str() + ".>";
}

ConsumerId ControlConsumer() {
  return {StreamName(std::string(kControlStream)), ConsumerName("controller")};
}

ConsumerId DeclConsumer(const std::string& node) {
  return {StreamName(std::string(kDeclStream)), ConsumerName("decl_" + node)};
}

ConsumerId SeatWorker(const std::string& seat) {
  return {StreamName(SeatStream(seat)), ConsumerName("worker")};
}

bool HasMeshDurableShape(std::string_view stream, std::string_view durable) {
  if (stream == kControlStream) return durable == "controller";
  if (stream == kDeclStream) {
    constexpr std::string_view kPrefix = "decl_";
    return durable.substr(0, kPrefix.size()) == kPrefix &&
           IsValidName(durable.substr(kPrefix.size()));
  }
  if (stream.substr(0, kSeatStreamPrefix.size()) == kSeatStreamPrefix) return durable == "worker";
  if (stream == kEventsStream) {
    constexpr std::string_view kPrefix = "ev_";
    if (durable.substr(0, kPrefix.size()) != kPrefix) return false;
    std::string_view rest = durable.substr(kPrefix.size());
    for (int part = 0; part < 3; ++part) {
      const size_t end = part < 2 ? rest.find('_') : rest.size();
      if (end == std::string_view::npos || !IsValidName(rest.substr(0, end))) return false;
      rest = end == rest.size() ? std::string_view() : rest.substr(end + 1);
    }
    return true;
  }
  return false;
}

ConsumerId EventConsumer(const std::string& follower, const FollowRef& follow) {
  return {StreamName(std::string(kEventsStream)),
          ConsumerName("ev_" + follower + "_" + follow.seat + "_" + follow.event)};
}

DesiredState Derive(const Records& records, const ReconcilerIdentity& reconciler) {
  return Deriver(records).Run(reconciler);
}

}  // namespace mesh::model
