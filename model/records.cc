// Parsing and validation of the records (contract section 1).
//
// Shape: the bytes are checked (size, NUL) and parsed by RapidJSON's iterative parser under a
// nesting limit into a DOM; a tolerant pre-pass collects what may be referenced before it is
// declared (seats and their events, nodes); then one walk over the DOM in document order builds
// the typed records and reports every error where it occurs, so errors come out in document
// order without sorting. Errors about an object's missing keys are reported at the object's
// start; errors about the document as a whole ("$") at the end.
#include "model/records.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <array>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace mesh::model {
namespace {

namespace rj = rapidjson;

constexpr std::string_view kRootPath = "$";
// The deepest records document nests 6 levels (root, modules, module, seats, seat, uses).
constexpr size_t kMaxDepth = 32;
// A pathological document (millions of bad entries) must not turn into gigabytes of errors.
constexpr size_t kMaxErrors = 1000;
constexpr size_t kMaxQuotedChars = 64;  // user text echoed in a message is cut after this
constexpr std::string_view kNameRule = "must match ^[a-z][a-z0-9-]{0,31}$";
constexpr std::string_view kRolePrefix = "mesh-";
constexpr int64_t kMinEventsMaxAgeSeconds = 120;
// max_age goes to the server in nanoseconds, an int64.
constexpr int64_t kMaxEventsMaxAgeSeconds = std::numeric_limits<int64_t>::max() / 1'000'000'000;
constexpr size_t kBcryptHashLength = 60;
constexpr size_t kMaxPasswordBytes = 72;  // bcrypt ignores every byte after the 72nd
constexpr unsigned kParseFlags = rj::kParseIterativeFlag | rj::kParseValidateEncodingFlag;

bool IsLower(char c) {
  return c >= 'a' && c <= 'z';
}
bool IsUpper(char c) {
  return c >= 'A' && c <= 'Z';
}
bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

// ^[A-Za-z][A-Za-z0-9_-]{0,63}$
bool IsValidAccountName(std::string_view name) {
  if (name.empty() || name.size() > 64 || !(IsLower(name[0]) || IsUpper(name[0]))) return false;
  for (char c : name) {
    if (!(IsLower(c) || IsUpper(c) || IsDigit(c) || c == '_' || c == '-')) return false;
  }
  return true;
}

// "$2a$" / "$2b$" / "$2y$", a two-digit cost 04..31, "$", 53 characters of bcrypt's base64.
bool LooksLikeBcrypt(std::string_view hash) {
  if (hash.size() != kBcryptHashLength) return false;
  if (hash.substr(0, 2) != "$2" || (hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') ||
      hash[3] != '$' || !IsDigit(hash[4]) || !IsDigit(hash[5]) || hash[6] != '$') {
    return false;
  }
  const int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  if (cost < 4 || cost > 31) return false;
  for (char c : hash.substr(7)) {
    if (!(IsLower(c) || IsUpper(c) || IsDigit(c) || c == '.' || c == '/')) return false;
  }
  return true;
}

// User text for a message: quoted, control characters escaped, cut after kMaxQuotedChars.
std::string QuoteForMessage(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  const std::string_view shown = text.substr(0, kMaxQuotedChars);
  for (char ch : shown) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += ch;
    }
  }
  out += '"';
  if (shown.size() < text.size()) out += "...";
  return out;
}

bool IsPlainKey(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    if (!(IsLower(c) || IsUpper(c) || IsDigit(c) || c == '_' || c == '-')) return false;
  }
  return true;
}

std::string KeyPath(std::string_view parent, std::string_view key) {
  if (!IsPlainKey(key)) return std::string(parent) + "[" + QuoteForMessage(key) + "]";
  if (parent == kRootPath) return std::string(key);
  return std::string(parent) + "." + std::string(key);
}

std::string IndexPath(std::string_view parent, size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

std::string_view View(const rj::Value& string_value) {
  return {string_value.GetString(), string_value.GetStringLength()};
}

// Forwards SAX events to the document, refusing nesting deeper than kMaxDepth. The iterative
// parser already keeps deep input off the call stack; this also keeps it off the heap.
class DepthLimitedHandler {
 public:
  explicit DepthLimitedHandler(rj::Document& document) : document_(document) {}
  bool too_deep() const { return too_deep_; }

  bool Null() { return document_.Null(); }
  bool Bool(bool b) { return document_.Bool(b); }
  bool Int(int i) { return document_.Int(i); }
  bool Uint(unsigned u) { return document_.Uint(u); }
  bool Int64(int64_t i) { return document_.Int64(i); }
  bool Uint64(uint64_t u) { return document_.Uint64(u); }
  bool Double(double d) { return document_.Double(d); }
  bool RawNumber(const char* str, rj::SizeType length, bool copy) {
    return document_.RawNumber(str, length, copy);
  }
  bool String(const char* str, rj::SizeType length, bool copy) {
    return document_.String(str, length, copy);
  }
  bool Key(const char* str, rj::SizeType length, bool copy) {
    return document_.Key(str, length, copy);
  }
  bool StartObject() { return Enter() && document_.StartObject(); }
  bool EndObject(rj::SizeType count) {
    --depth_;
    return document_.EndObject(count);
  }
  bool StartArray() { return Enter() && document_.StartArray(); }
  bool EndArray(rj::SizeType count) {
    --depth_;
    return document_.EndArray(count);
  }

 private:
  bool Enter() {
    if (++depth_ > kMaxDepth) too_deep_ = true;
    return !too_deep_;
  }

  rj::Document& document_;
  size_t depth_ = 0;
  bool too_deep_ = false;
};

// Parses `json` into `document`; on failure returns the "$" error text.
std::string ParseJson(std::string_view json, rj::Document& document) {
  if (json.empty()) return "empty document";
  // RapidJSON's streams read NUL as the end of input, which would hide what follows it; a raw
  // NUL byte is valid nowhere in JSON text.
  if (const void* nul = std::memchr(json.data(), '\0', json.size())) {
    const auto offset = static_cast<const char*>(nul) - json.data();
    return "not JSON: NUL byte at byte offset " + std::to_string(offset);
  }
  rj::MemoryStream stream(json.data(), json.size());
  rj::Reader reader;
  DepthLimitedHandler handler(document);
  bool parsed = false;
  auto generator = [&](rj::Document&) {  // the handler already forwards to `document`
    parsed = reader.Parse<kParseFlags>(stream, handler);
    return parsed;
  };
  document.Populate(generator);
  if (handler.too_deep()) {
    return "nested deeper than " + std::to_string(kMaxDepth) + " levels at byte offset " +
           std::to_string(reader.GetErrorOffset());
  }
  if (!parsed) {
    return std::string("not JSON: ") + rj::GetParseError_En(reader.GetParseErrorCode()) +
           " (at byte offset " + std::to_string(reader.GetErrorOffset()) + ")";
  }
  if (stream.Tell() != json.size()) {  // defence in depth: the whole input must be consumed
    return "not JSON: trailing data at byte offset " + std::to_string(stream.Tell());
  }
  return {};
}

// Whatever may be referenced before it is declared, gathered tolerantly from the raw DOM
// (the walk reports what is malformed). A duplicated key counts by its first occurrence, as in
// the walk.
struct Declared {
  std::unordered_map<std::string, std::unordered_set<std::string>> seat_events;
  std::unordered_set<std::string> nodes;
};

const rj::Value* Member(const rj::Value& object, std::string_view key, rj::Type type) {
  if (!object.IsObject()) return nullptr;
  const auto it = object.FindMember(rj::Value(rj::StringRef(key.data(), key.size())));
  if (it == object.MemberEnd() || it->value.GetType() != type) return nullptr;
  return &it->value;
}

void DeclareSeat(const rj::Value& seat, Declared& declared) {
  const rj::Value* name = Member(seat, "name", rj::kStringType);
  if (name == nullptr) return;
  auto& events = declared.seat_events[std::string(View(*name))];
  if (const rj::Value* emits = Member(seat, "emits", rj::kArrayType)) {
    for (const rj::Value& event : emits->GetArray()) {
      if (event.IsString()) events.emplace(View(event));
    }
  }
}

Declared CollectDeclared(const rj::Value& root) {
  Declared declared;
  if (const rj::Value* nodes = Member(root, "nodes", rj::kArrayType)) {
    for (const rj::Value& node : nodes->GetArray()) {
      if (const rj::Value* name = Member(node, "name", rj::kStringType)) {
        declared.nodes.emplace(View(*name));
      }
    }
  }
  if (const rj::Value* modules = Member(root, "modules", rj::kArrayType)) {
    for (const rj::Value& module : modules->GetArray()) {
      if (const rj::Value* seats = Member(module, "seats", rj::kArrayType)) {
        for (const rj::Value& seat : seats->GetArray()) DeclareSeat(seat, declared);
      }
    }
  }
  if (const rj::Value* roles = Member(root, "roles", rj::kArrayType)) {
    for (const rj::Value& role : roles->GetArray()) DeclareSeat(role, declared);
  }
  return declared;
}

struct KeySpec {
  std::string_view name;
  bool required;
};

enum class NameKind { kPrincipal, kSeat, kWorkKind, kEvent, kNode };

std::string_view NameKindText(NameKind kind) {
  switch (kind) {
    case NameKind::kPrincipal:
      return "principal";
    case NameKind::kSeat:
      return "seat";
    case NameKind::kWorkKind:
      return "work kind";
    case NameKind::kEvent:
      return "event";
    case NameKind::kNode:
      return "node";
  }
  return "";
}

std::string InvalidNameMessage(NameKind kind, std::string_view name) {
  return "invalid " + std::string(NameKindText(kind)) + " name " + QuoteForMessage(name) + " (" +
         std::string(kNameRule) + ")";
}

// Where a module seat or a role sits: the rules on its name differ.
enum class SeatOwner { kModule, kRole };

class Validator {
 public:
  Validator(const ParseOptions& options, Declared declared)
      : options_(options), declared_(std::move(declared)) {}

  ParseOutcome Run(const rj::Value& root) {
    ParseOutcome outcome;
    if (!root.IsObject()) {
      Error(kRootPath, "expected an object");
      outcome.errors = std::move(errors_);
      return outcome;
    }
    ReadRoot(root, outcome.records);
    if (!credential_seen_ && !stopped_) {
      Error(kRootPath,
            "no principal has a credential (password or password_bcrypt): the bus would refuse "
            "every connection");
    }
    if (stopped_) {
      errors_.push_back({std::string(kRootPath),
                         "too many errors: stopped after the first " + std::to_string(kMaxErrors)});
    }
    outcome.errors = std::move(errors_);
    return outcome;
  }

 private:
  // One unique namespace (principals, seats): the first declaration wins, later ones are
  // errors that point back at it.
  struct UniqueNames {
    std::string_view what;
    std::unordered_map<std::string, std::string> first_path;
  };

  // Past kMaxErrors the walk stops: the loops below check stopped_.
  void Error(std::string_view path, std::string message) {
    if (errors_.size() >= kMaxErrors) {
      stopped_ = true;
      return;
    }
    errors_.push_back({std::string(path), std::move(message)});
  }

  // Reports missing required keys, then walks the members in document order: unknown and
  // repeated keys are errors, known ones go to on_member(key, value, path).
  template <size_t N, typename OnMember>
  bool WalkObject(const rj::Value& value, std::string_view path, const std::array<KeySpec, N>& keys,
                  OnMember&& on_member) {
    if (!value.IsObject()) {
      Error(path, "expected an object");
      return false;
    }
    for (const KeySpec& key : keys) {
      if (key.required && !HasMember(value, key.name)) {
        Error(KeyPath(path, key.name), "required key is missing");
      }
    }
    std::array<bool, N> seen{};
    for (const auto& member : value.GetObject()) {
      if (stopped_) break;
      const std::string_view key = View(member.name);
      const std::string member_path = KeyPath(path, key);
      size_t index = 0;
      while (index < N && keys[index].name != key) ++index;
      if (index == N) {
        Error(member_path, "unknown key");
      } else if (seen[index]) {
        Error(member_path, "duplicate key");
      } else {
        seen[index] = true;
        on_member(key, member.value, member_path);
      }
    }
    return true;
  }

  static bool HasMember(const rj::Value& object, std::string_view key) {
    return object.FindMember(rj::Value(rj::StringRef(key.data(), key.size()))) !=
           object.MemberEnd();
  }

  bool ReadString(const rj::Value& value, std::string_view path, std::string& out) {
    if (!value.IsString()) {
      Error(path, "expected a string");
      return false;
    }
    out.assign(View(value));
    return true;
  }

  bool ReadInt64(const rj::Value& value, std::string_view path, int64_t& out) {
    if (value.IsInt64()) {
      out = value.GetInt64();
      return true;
    }
    Error(path, value.IsUint64() ? "integer out of range" : "expected an integer");
    return false;
  }

  // A string that must be a valid name; true when it is.
  bool ReadName(const rj::Value& value, std::string_view path, NameKind kind, std::string& out) {
    if (!ReadString(value, path, out)) return false;
    if (IsValidName(out)) return true;
    Error(path, InvalidNameMessage(kind, out));
    return false;
  }

  // Reads a list; on_item(value, path) returns the item's identity (empty when the item is
  // invalid). Repeated identities are errors.
  template <typename OnItem>
  void ReadList(const rj::Value& value, std::string_view path, std::string_view what,
                OnItem&& on_item) {
    if (!value.IsArray()) {
      Error(path, "expected an array");
      return;
    }
    std::unordered_set<std::string> seen;
    size_t index = 0;
    for (const rj::Value& item : value.GetArray()) {
      if (stopped_) break;
      const std::string item_path = IndexPath(path, index++);
      std::string identity = on_item(item, item_path);
      if (!identity.empty() && !seen.insert(identity).second) {
        Error(item_path, "duplicate " + std::string(what) + " " + QuoteForMessage(identity));
      }
    }
  }

  // A list of names of one kind; `exists(name)` says whether a valid name refers to something
  // declared (always true for accepts and emits, which declare).
  template <typename Exists>
  void ReadNameList(const rj::Value& value, std::string_view path, NameKind kind, Exists&& exists,
                    std::vector<std::string>& out) {
    ReadList(value, path, NameKindText(kind), [&](const rj::Value& item, std::string_view at) {
      std::string name;
      const bool valid = ReadName(item, at, kind, name);
      if (valid && !exists(name)) {
        Error(at, "unknown " + std::string(NameKindText(kind)) + " " + QuoteForMessage(name));
      }
      out.push_back(name);
      return valid ? name : std::string();
    });
  }

  static bool Declares(const std::string&) { return true; }
  bool SeatExists(const std::string& name) const { return declared_.seat_events.contains(name); }
  bool NodeExists(const std::string& name) const { return declared_.nodes.contains(name); }

  // Seat names (uses, submits_to): valid and declared.
  void ReadSeatRefs(const rj::Value& value, std::string_view path, std::vector<std::string>& out) {
    ReadNameList(
        value, path, NameKind::kSeat, [&](const std::string& name) { return SeatExists(name); },
        out);
  }

  void ReadFollows(const rj::Value& value, std::string_view path, std::vector<FollowRef>& out) {
    ReadList(value, path, "follows entry", [&](const rj::Value& item, std::string_view at) {
      std::string text;
      if (!ReadString(item, at, text)) return std::string();
      const size_t dot = text.find('.');
      if (dot == std::string::npos || text.find('.', dot + 1) != std::string::npos) {
        Error(at, "expected \"<seat>.<event>\", got " + QuoteForMessage(text));
        return std::string();
      }
      FollowRef ref{text.substr(0, dot), text.substr(dot + 1)};
      bool valid = true;
      for (const auto& [name, kind] :
           {std::pair{&ref.seat, NameKind::kSeat}, std::pair{&ref.event, NameKind::kEvent}}) {
        if (!IsValidName(*name)) {
          Error(at, InvalidNameMessage(kind, *name));
          valid = false;
        }
      }
      if (valid) {
        if (!SeatExists(ref.seat)) {
          Error(at, "unknown seat " + QuoteForMessage(ref.seat));
        } else if (!declared_.seat_events.at(ref.seat).contains(ref.event)) {
          Error(at, "seat " + QuoteForMessage(ref.seat) + " does not emit " +
                        QuoteForMessage(ref.event));
        }
      }
      out.push_back(std::move(ref));
      return valid ? text : std::string();
    });
  }

  // Records the first use of `name` in a unique namespace, or reports a repeated one.
  void Claim(UniqueNames& names, const std::string& name, std::string_view path) {
    const auto [it, inserted] = names.first_path.emplace(name, std::string(path));
    if (!inserted) {
      Error(path, "duplicate " + std::string(names.what) + " name " + QuoteForMessage(name) +
                      " (first at " + it->second + ")");
    }
  }

  void ReadPrincipalName(const rj::Value& value, std::string_view path, std::string& out) {
    if (!ReadName(value, path, NameKind::kPrincipal, out)) return;
    if (out == options_.reconciler_user) {
      Error(path, QuoteForMessage(out) + " is reserved: it is the reconciler's own user");
      return;
    }
    Claim(principals_, out, path);
  }

  // password / password_bcrypt, on the controller, a node or a module.
  void ReadCredential(std::string_view key, const rj::Value& value, std::string_view path,
                      Credential& out) {
    credential_seen_ = true;
    const bool bcrypt = key == "password_bcrypt";
    if (credential_key_seen_) {  // WalkObject refuses a repeated key: this is the other one
      Error(path, "password and password_bcrypt are both given; use one");
    }
    credential_key_seen_ = true;
    std::string secret;
    if (!ReadString(value, path, secret)) return;
    if (bcrypt) {
      if (!LooksLikeBcrypt(secret)) {
        Error(path, "not a bcrypt hash (expected $2a$, $2b$ or $2y$, a cost of 04 to 31, " +
                        std::to_string(kBcryptHashLength) + " characters)");
        return;
      }
    } else if (secret.empty()) {
      Error(path, "must not be empty");
      return;
    } else if (secret.find('\0') != std::string::npos) {
      Error(path, "must not contain a NUL character");
      return;
    } else if (secret.size() > kMaxPasswordBytes) {
      Error(path, "longer than " + std::to_string(kMaxPasswordBytes) +
                      " bytes (bcrypt ignores the rest)");
      return;
    }
    if (out.kind == Credential::Kind::kNone) {
      out.kind = bcrypt ? Credential::Kind::kBcrypt : Credential::Kind::kPlain;
      out.secret = std::move(secret);
    }
  }

  static bool IsCredentialKey(std::string_view key) {
    return key == "password" || key == "password_bcrypt";
  }

  void ReadRoot(const rj::Value& root, Records& records) {
    static constexpr std::array<KeySpec, 7> kKeys{{{"version", true},
                                                   {"mesh", true},
                                                   {"bus", false},
                                                   {"controller", true},
                                                   {"nodes", false},
                                                   {"modules", false},
                                                   {"roles", false}}};
    WalkObject(root, kRootPath, kKeys,
               [&](std::string_view key, const rj::Value& value, std::string_view path) {
                 if (key == "version") {
                   int64_t version = 0;
                   if (!ReadInt64(value, path, version)) return;
                   if (version != 1) {
                     Error(path,
                           "unsupported version " + std::to_string(version) + " (expected 1)");
                   }
                   records.version = version == 1 ? 1 : 0;
                 } else if (key == "mesh") {
                   ReadMeshName(value, path, records.mesh);
                 } else if (key == "bus") {
                   ReadBus(value, path, records.bus);
                 } else if (key == "controller") {
                   ReadController(value, path, records.controller);
                 } else if (key == "nodes") {
                   ReadItems(value, path, records.nodes, &Validator::ReadNode);
                 } else if (key == "modules") {
                   ReadItems(value, path, records.modules, &Validator::ReadModule);
                 } else {
                   ReadItems(value, path, records.roles, &Validator::ReadRole);
                 }
               });
  }

  // A list of objects (nodes, modules, roles); items are not compared with each other here.
  template <typename T>
  void ReadItems(const rj::Value& value, std::string_view path, std::vector<T>& out,
                 void (Validator::*read)(const rj::Value&, std::string_view, T&)) {
    if (!value.IsArray()) {
      Error(path, "expected an array");
      return;
    }
    size_t index = 0;
    for (const rj::Value& item : value.GetArray()) {
      if (stopped_) break;
      (this->*read)(item, IndexPath(path, index++), out.emplace_back());
    }
  }

  void ReadMeshName(const rj::Value& value, std::string_view path, std::string& out) {
    if (!ReadString(value, path, out)) return;
    if (out.empty()) {
      Error(path, "must not be empty");
      return;
    }
    for (char c : out) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f) {
        Error(path, "must not contain control characters");
        return;
      }
    }
  }

  void ReadBus(const rj::Value& value, std::string_view path, Bus& bus) {
    static constexpr std::array<KeySpec, 3> kKeys{
        {{"account", false}, {"replicas", false}, {"events_max_age_seconds", false}}};
    WalkObject(value, path, kKeys,
               [&](std::string_view key, const rj::Value& member, std::string_view at) {
                 if (key == "account") {
                   if (ReadString(member, at, bus.account) && !IsValidAccountName(bus.account)) {
                     Error(at, "invalid account name " + QuoteForMessage(bus.account) +
                                   " (must match ^[A-Za-z][A-Za-z0-9_-]{0,63}$)");
                   }
                 } else if (key == "replicas") {
                   int64_t replicas = 0;
                   if (!ReadInt64(member, at, replicas)) return;
                   if (replicas != 1 && replicas != 3 && replicas != 5) {
                     Error(at, "must be 1, 3 or 5, got " + std::to_string(replicas));
                     return;
                   }
                   bus.replicas = static_cast<int>(replicas);
                 } else {
                   int64_t seconds = 0;
                   if (!ReadInt64(member, at, seconds)) return;
                   if (seconds < kMinEventsMaxAgeSeconds) {
                     Error(at, "must be at least " + std::to_string(kMinEventsMaxAgeSeconds) +
                                   " (the server's duplicate window), got " +
                                   std::to_string(seconds));
                   } else if (seconds > kMaxEventsMaxAgeSeconds) {
                     Error(at, "must be at most " + std::to_string(kMaxEventsMaxAgeSeconds));
                   }
                   bus.events_max_age_seconds = seconds;
                 }
               });
  }

  void ReadController(const rj::Value& value, std::string_view path, Controller& controller) {
    static constexpr std::array<KeySpec, 5> kKeys{{{"user", true},
                                                   {"password", false},
                                                   {"password_bcrypt", false},
                                                   {"submits_to", false},
                                                   {"follows", false}}};
    credential_key_seen_ = false;
    WalkObject(value, path, kKeys,
               [&](std::string_view key, const rj::Value& member, std::string_view at) {
                 if (key == "user") {
                   ReadPrincipalName(member, at, controller.user);
                 } else if (IsCredentialKey(key)) {
                   ReadCredential(key, member, at, controller.credential);
                 } else if (key == "submits_to") {
                   ReadSeatRefs(member, at, controller.submits_to);
                 } else {
                   ReadFollows(member, at, controller.follows);
                 }
               });
  }

  void ReadNode(const rj::Value& value, std::string_view path, Node& node) {
    static constexpr std::array<KeySpec, 3> kKeys{
        {{"name", true}, {"password", false}, {"password_bcrypt", false}}};
    credential_key_seen_ = false;
    WalkObject(value, path, kKeys,
               [&](std::string_view key, const rj::Value& member, std::string_view at) {
                 if (key == "name") {
                   ReadPrincipalName(member, at, node.name);
                 } else {
                   ReadCredential(key, member, at, node.credential);
                 }
               });
  }

  void ReadModule(const rj::Value& value, std::string_view path, Module& module) {
    static constexpr std::array<KeySpec, 5> kKeys{{{"name", true},
                                                   {"password", false},
                                                   {"password_bcrypt", false},
                                                   {"seats", false},
                                                   {"follows", false}}};
    credential_key_seen_ = false;
    WalkObject(value, path, kKeys,
               [&](std::string_view key, const rj::Value& member, std::string_view at) {
                 if (key == "name") {
                   ReadPrincipalName(member, at, module.name);
                 } else if (IsCredentialKey(key)) {
                   ReadCredential(key, member, at, module.credential);
                 } else if (key == "seats") {
                   ReadItems(member, at, module.seats, &Validator::ReadModuleSeat);
                 } else {
                   ReadFollows(member, at, module.follows);
                 }
               });
  }

  void ReadModuleSeat(const rj::Value& value, std::string_view path, Seat& seat) {
    static constexpr std::array<KeySpec, 4> kKeys{
        {{"name", true}, {"accepts", false}, {"emits", false}, {"uses", false}}};
    WalkObject(value, path, kKeys,
               [&](std::string_view key, const rj::Value& member, std::string_view at) {
                 ReadSeatMember(SeatOwner::kModule, key, member, at, seat);
               });
  }

  void ReadRole(const rj::Value& value, std::string_view path, Role& role) {
    static constexpr std::array<KeySpec, 5> kKeys{{{"name", true},
                                                   {"accepts", false},
                                                   {"emits", false},
                                                   {"uses", false},
                                                   {"holders", false}}};
    WalkObject(value, path, kKeys,
               [&](std::string_view key, const rj::Value& member, std::string_view at) {
                 if (key == "holders") {
                   ReadNameList(
                       member, at, NameKind::kNode,
                       [&](const std::string& name) { return NodeExists(name); }, role.holders);
                 } else {
                   ReadSeatMember(SeatOwner::kRole, key, member, at, role.seat);
                 }
               });
  }

  // A member shared by module seats and roles: name, accepts, emits, uses.
  void ReadSeatMember(SeatOwner owner, std::string_view key, const rj::Value& member,
                      std::string_view at, Seat& seat) {
    if (key == "name") {
      if (!ReadName(member, at, NameKind::kSeat, seat.name)) return;
      const bool prefixed = seat.name.starts_with(kRolePrefix);
      if (owner == SeatOwner::kRole && !prefixed) {
        Error(at, "role names must start with \"mesh-\"");
      } else if (owner == SeatOwner::kModule && prefixed) {
        Error(at, "module seat names must not start with \"mesh-\" (reserved for roles)");
      }
      Claim(seats_, seat.name, at);
    } else if (key == "accepts") {
      ReadNameList(member, at, NameKind::kWorkKind, Declares, seat.accepts);
    } else if (key == "emits") {
      ReadNameList(member, at, NameKind::kEvent, Declares, seat.emits);
    } else {
      ReadSeatRefs(member, at, seat.uses);
    }
  }

  const ParseOptions& options_;
  const Declared declared_;
  UniqueNames principals_{"principal", {}};
  UniqueNames seats_{"seat", {}};
  bool credential_seen_ = false;      // any principal gave a credential key
  bool credential_key_seen_ = false;  // the current principal gave one already
  std::vector<ValidationError> errors_;
  bool stopped_ = false;  // kMaxErrors reached
};

}  // namespace

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > 32 || !IsLower(name[0])) return false;
  for (char c : name) {
    if (!(IsLower(c) || IsDigit(c) || c == '-')) return false;
  }
  return true;
}

ParseOutcome ParseRecords(std::string_view json, const ParseOptions& options) {
  ParseOutcome outcome;
  if (json.size() > kMaxRecordsBytes) {
    outcome.errors.push_back({std::string(kRootPath), "document is " + std::to_string(json.size()) +
                                                          " bytes, more than the limit of " +
                                                          std::to_string(kMaxRecordsBytes)});
    return outcome;
  }
  rj::Document document;
  if (std::string parse_error = ParseJson(json, document); !parse_error.empty()) {
    outcome.errors.push_back({std::string(kRootPath), std::move(parse_error)});
    return outcome;
  }
  return Validator(options, CollectDeclared(document)).Run(document);
}

}  // namespace mesh::model
