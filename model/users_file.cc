// Rendering the users file (contract section 5) and cutting it back into per-user blocks.
// Pure: no I/O, no clock. The bcrypt hasher lives in model/bcrypt.cc.
//
// Layout (SplitUserBlocks relies on it; RenderedUsersFile.entries are exactly these bytes):
//
//   # header comment lines
//   accounts {
//     "<account>": {
//       jetstream: enabled
//       users: [
//         {                          <- a user's block starts with this line...
//           # credential digest: hmac-sha256-v1 <hex>   <- plain passwords only
//           user: "<user>"
//           password: "<bcrypt hash>"
//           permissions: {
//             publish: {
//               allow: [
//                 "<subject>"
//               ]
//             }
//             subscribe: {
//               deny: [
//                 ">"                <- an empty allow list: nats reads "no allow" as allow-all
//               ]
//             }
//           }
//         }                          <- ...and ends with this one (newline included)
//       ]
//     }
//   }
//
// With UsersScope::kAccount the `accounts {` line and its closing brace are left out and
// everything inside is indented one level less: the file is the account entry alone, to be
// included inside the operator's own `accounts` block.
//
// Every string is double-quoted: unquoted, "$JS.ACK..." or "$2b$..." is read by nats-server as a
// variable reference and the whole file is refused.
#include "model/users_file.h"

#include <cstdio>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>

namespace mesh::model {
namespace {

constexpr std::string_view kHeader =
    "# Managed by mesh-reconciler: rendered from the mesh records. Do not edit; every change\n"
    "# is overwritten. Passwords are bcrypt hashes. Principals without a credential are left\n"
    "# out (the reconciler's report names them).\n";

constexpr std::string_view kAccountHeader =
    "# This is the mesh's account entry only: include it inside the accounts block of the\n"
    "# server's configuration, e.g. accounts { include \"mesh-account.conf\" OTHER: {...} }.\n";

// A double-quoted string in nats-server configuration syntax (its lexer knows the escapes
// t, n, r, quote, backslash and xHH).
std::string ConfString(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
          char hex[5];
          std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(ch));
          out += hex;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

std::string Indent(int level) {
  return std::string(static_cast<size_t>(level) * 2, ' ');
}

void AppendList(std::string& out, int level, std::string_view key,
                const std::vector<std::string>& items) {
  out += Indent(level) + std::string(key) + ": [\n";
  for (const std::string& item : items) out += Indent(level + 1) + ConfString(item) + "\n";
  out += Indent(level) + "]\n";
}

// One direction of a user's permissions. An empty allow list is written as deny-all: nats-server
// treats a missing (or empty) allow list as "everything allowed".
void AppendDirection(std::string& out, int level, std::string_view direction,
                     const std::vector<std::string>& allow) {
  out += Indent(level) + std::string(direction) + ": {\n";
  if (allow.empty()) {
    AppendList(out, level + 1, "deny", {">"});
  } else {
    AppendList(out, level + 1, "allow", allow);
  }
  out += Indent(level) + "}\n";
}

// The indentation of a user's `{` line: accounts { "<account>": { users: [ {
int UserLevel(UsersScope scope) {
  return scope == UsersScope::kServer ? 3 : 2;
}

std::string RenderUser(const Principal& principal, const std::string& hash,
                       const std::string* digest, UsersScope scope) {
  const int level = UserLevel(scope);
  std::string out;
  out += Indent(level) + "{\n";
  if (digest != nullptr) {
    out += Indent(level + 1) + std::string(kDigestCommentPrefix) + *digest + "\n";
  }
  out += Indent(level + 1) + "user: " + ConfString(principal.user.str()) + "\n";
  out += Indent(level + 1) + "password: " + ConfString(hash) + "\n";
  out += Indent(level + 1) + "permissions: {\n";
  AppendDirection(out, level + 2, "publish", principal.publish_allow);
  AppendDirection(out, level + 2, "subscribe", principal.subscribe_allow);
  out += Indent(level + 1) + "}\n";
  out += Indent(level) + "}\n";
  return out;
}

// A prefix check only (what the users file must never carry is plain text, and every hash of
// ours starts so); records.cc's LooksLikeBcrypt checks a whole hash.
bool StartsLikeBcrypt(const std::string& hash) {
  return hash.rfind("$2", 0) == 0;
}

// --- SplitUserBlocks: a small scanner over nats-server configuration syntax. ---

bool IsSpace(char ch) {
  return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}
bool IsBareChar(char ch) {
  return !IsSpace(ch) && std::string_view("{}[]:=,#\"';").find(ch) == std::string_view::npos;
}

class BlockScanner {
 public:
  explicit BlockScanner(const std::string& text) : text_(text) {}

  std::map<UserName, std::string> Run() {
    while (pos_ < text_.size()) Step();
    return std::move(blocks_);
  }

 private:
  struct Frame {
    size_t open = 0;  // position of '{' or '['
    bool is_map = false;
    bool user_key_seen = false;  // "user" then ':' or '=' at this level
    std::optional<std::string> user;
  };

  void Step() {
    const char ch = text_[pos_];
    if (IsSpace(ch) || ch == ',' || ch == ';') {
      ++pos_;
    } else if (ch == '#' || (ch == '/' && Peek(1) == '/')) {
      SkipLine();
    } else if (ch == '{' || ch == '[') {
      frames_.push_back(Frame{pos_, ch == '{', false, std::nullopt});
      ++pos_;
    } else if (ch == '}' || ch == ']') {
      Close();
      ++pos_;
    } else if (ch == ':' || ch == '=') {
      if (!frames_.empty() && last_token_ == "user" && last_token_depth_ == frames_.size()) {
        frames_.back().user_key_seen = true;
      }
      last_token_.reset();
      ++pos_;
    } else {
      Token(ch == '"' || ch == '\'' ? QuotedToken(ch) : BareToken());
    }
  }

  char Peek(size_t ahead) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

  void SkipLine() {
    while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
  }

  std::string QuotedToken(char quote) {
    std::string value;
    ++pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (quote == '"' && text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
      value += text_[pos_++];
    }
    ++pos_;  // the closing quote (or past the end)
    return value;
  }

  std::string BareToken() {
    const size_t start = pos_;
    while (pos_ < text_.size() && IsBareChar(text_[pos_])) ++pos_;
    if (pos_ == start) ++pos_;  // a stray character: skip it
    return text_.substr(start, pos_ - start);
  }

  void Token(std::string value) {
    if (!frames_.empty() && frames_.back().is_map && frames_.back().user_key_seen &&
        !frames_.back().user) {
      frames_.back().user = value;
    }
    last_token_ = std::move(value);
    last_token_depth_ = frames_.size();
  }

  void Close() {
    last_token_.reset();
    if (frames_.empty()) return;
    Frame frame = std::move(frames_.back());
    frames_.pop_back();
    if (!frame.is_map || !frame.user) return;
    const size_t line_start = text_.rfind('\n', frame.open);
    const size_t begin = line_start == std::string::npos ? 0 : line_start + 1;
    const size_t newline = text_.find('\n', pos_);
    const size_t end = newline == std::string::npos ? text_.size() : newline + 1;
    blocks_.emplace(UserName(*frame.user), text_.substr(begin, end - begin));
  }

  const std::string& text_;
  size_t pos_ = 0;
  std::vector<Frame> frames_;
  std::optional<std::string> last_token_;
  size_t last_token_depth_ = 0;
  std::map<UserName, std::string> blocks_;
};

}  // namespace

const char* ToString(UsersScope v) {
  return kUsersScopeNames.Name(v);
}

Result<RenderedUsersFile> RenderUsersFile(const DesiredState& desired,
                                          const HashedCredentials& hashes, UsersScope scope,
                                          const CredentialDigests& digests) {
  bool any_principal = false;
  for (const Principal& p : desired.principals) {
    if (p.kind != PrincipalKind::kReconciler && p.credential.kind != Credential::Kind::kNone) {
      any_principal = true;
    }
  }
  if (!any_principal) {
    return Result<RenderedUsersFile>(
        Errc::kInvalidArgument,
        "$: no principal of the records has a credential (the reconciler's own user does not "
        "count): the bus would refuse every connection in the mesh");
  }

  RenderedUsersFile out;
  out.without_credential = desired.without_credential;
  const int base = scope == UsersScope::kServer ? 1 : 0;  // the account entry's level
  out.bytes += kHeader;
  if (scope == UsersScope::kServer) {
    out.bytes += "accounts {\n";
  } else {
    out.bytes += kAccountHeader;
  }
  out.bytes += Indent(base) + ConfString(desired.account) + ": {\n";
  out.bytes += Indent(base + 1) + "jetstream: enabled\n";
  out.bytes += Indent(base + 1) + "users: [\n";
  for (const Principal& p : desired.principals) {  // sorted by user name
    if (p.credential.kind == Credential::Kind::kNone) continue;
    auto hash = hashes.find(p.user);
    if (hash == hashes.end()) {
      return Result<RenderedUsersFile>(Errc::kInternal,
                                       "no bcrypt hash for user " + ConfString(p.user.str()));
    }
    if (!StartsLikeBcrypt(hash->second)) {  // never write anything that could be plain text
      return Result<RenderedUsersFile>(
          Errc::kInternal,
          "the credential for user " + ConfString(p.user.str()) + " is not bcrypt");
    }
    auto digest = digests.find(p.user);
    std::string block =
        RenderUser(p, hash->second, digest == digests.end() ? nullptr : &digest->second, scope);
    out.entries.emplace(p.user, EntrySpan{out.bytes.size(), block.size()});
    out.bytes += block;
  }
  out.bytes += Indent(base + 1) + "]\n";
  out.bytes += Indent(base) + "}\n";
  if (scope == UsersScope::kServer) out.bytes += "}\n";
  return out;
}

std::optional<std::string_view> RenderedUsersFile::Block(const UserName& user) const {
  auto it = entries.find(user);
  if (it == entries.end()) return std::nullopt;
  return std::string_view(bytes).substr(it->second.offset, it->second.size);
}

std::string RenderedUsersFile::BlockAt(const UserName& user) const {
  std::optional<std::string_view> block = Block(user);
  if (!block) throw std::out_of_range("no users file entry for " + user.str());
  return std::string(*block);
}

std::map<UserName, std::string> RenderedUsersFile::Blocks() const {
  std::map<UserName, std::string> out;
  for (const auto& [user, span] : entries) {
    out.emplace_hint(out.end(), user, bytes.substr(span.offset, span.size));
  }
  return out;
}

std::map<UserName, std::string> SplitUserBlocks(const std::string& bytes) {
  return BlockScanner(bytes).Run();
}

}  // namespace mesh::model
