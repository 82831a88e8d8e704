#include "reconciler/pass/renderer.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "reconciler/base/log.h"

namespace mesh::reconciler {

Renderer::Renderer(const PassSettings& settings, std::string own_password,
                   std::shared_ptr<observers::Observer> observer,
                   std::optional<BackgroundHashing> background)
    : settings_(settings),
      observer_(std::move(observer)),
      background_(std::move(background)),
      own_password_(std::move(own_password)) {}

Renderer::~Renderer() {
  StopHashJob();
}

bool Renderer::DeriveAndRender(PassReport& report, const model::Records& records,
                               uint64_t generation) {
  if (derived_from_ != generation) {
    model::ReconcilerIdentity identity = OwnIdentity(settings_);
    identity.credential = own_password_.empty()
                              ? model::Credential{}
                              : model::Credential{model::Credential::Kind::kPlain, own_password_};
    desired_ = model::Derive(records, identity);
    derived_from_ = generation;
    state_ = RenderingState::kPending;
    rendered_ = {};
  }
  if (state_ != RenderingState::kReady && !Render(report)) {
    derived_from_.reset();  // the next pass renders again
    return false;
  }
  report.without_credential = desired_.without_credential;
  return true;
}

bool Renderer::Render(PassReport& report) {
  if (settings_.users_file.empty()) {
    rendered_ = {};
    state_ = RenderingState::kReady;
    return true;
  }
  if (own_password_.empty()) {
    // Rendering without our own credential would lock the reconciler out of the bus.
    report.status = Status(Errc::kInvalidArgument,
                           "the users file is managed (--users-file) but the reconciler's "
                           "password is not set (MESH_RECONCILER_PASSWORD or --password-file)");
    return false;
  }
  if (job_) {
    if (!job_->finished.load()) {
      // Still hashing: the interim file (if any) was planned by an earlier pass; from now on
      // the users file waits for the job.
      if (state_ == RenderingState::kInterim) state_ = RenderingState::kPending;
      report.credentials_pending = job_->pending.load();
      return true;
    }
    if (!CollectHashJob(report)) return false;
    if (state_ == RenderingState::kReady) return true;
  }
  if (!hasher_) {
    hasher_ = std::make_unique<model::BcryptHasher>(own_password_, settings_.bcrypt_cost);
  }
  // The users file as it is now: every hash its digest proves is reused, not computed again;
  // one of another cost than --bcrypt-cost only without --rehash (proven with the key at its
  // cost: one bcrypt for all of them).
  const std::string existing = observer_->UsersFile(settings_.users_file).bytes;
  model::HashedCredentials reusable =
      model::ProvenBy(*hasher_, desired_, existing, model::OtherCostHashes::kKeep);
  other_cost_kept_ = 0;
  other_cost_to_rehash_ = 0;
  for (auto it = reusable.begin(); it != reusable.end();) {
    if (model::HashCost(it->second) == hasher_->cost()) {
      ++it;
    } else if (settings_.other_costs == model::OtherCostHashes::kRehash) {
      ++other_cost_to_rehash_;
      it = reusable.erase(it);
    } else {
      ++other_cost_kept_;
      ++it;
    }
  }
  if (other_cost_kept_ > 0 || other_cost_to_rehash_ > 0) {
    Log(LogLevel::kInfo, report.pass_id,
        other_cost_kept_ > 0
            ? "users file: hashes of another cost than --bcrypt-cost kept (proven by their "
              "digests; --rehash hashes them again)"
            : "users file: hashes of another cost than --bcrypt-cost to re-hash (--rehash)",
        {{"hashes", other_cost_kept_ + other_cost_to_rehash_}, {"bcrypt_cost", hasher_->cost()}});
  }
  if (previous_key_) {
    // Written before the password rotated: proven with the old key, rewritten with the new.
    reusable.merge(model::ReusableHashes(desired_, existing, *previous_key_, hasher_->cost()));
  }
  hasher_->Adopt(desired_, reusable);
  if (!background_ && report.mode == ApplyMode::kObserveOnly && report.trigger == Trigger::kOnce &&
      hasher_->Uncached(desired_) > 0) {
    return RenderForPlan(report);
  }
  if (background_ && hasher_->Uncached(desired_) > 0 && StartHashJob(report, existing, reusable)) {
    return true;
  }
  return RenderInline(report);
}

bool Renderer::RenderForPlan(PassReport& report) {
  // What is not proven differs from the file whatever its hash would be: `plan` says so without
  // bcrypt. Such an entry is rendered with a mark in place of its hash (never written: this
  // rendering is observe-only, kEstimate, and the next pass renders again).
  model::HashedCredentials hashes;
  unhashed_for_plan_ = 0;
  for (const model::Principal& p : desired_.principals) {
    if (p.credential.kind == model::Credential::Kind::kNone) continue;
    if (std::optional<std::string> hash = hasher_->Cached(p.user, p.credential)) {
      hashes.emplace(p.user, std::move(*hash));
    } else {
      hashes.emplace(p.user, "$2b$(not hashed by plan)");
      ++unhashed_for_plan_;
    }
  }
  model::CredentialDigests digests;
  for (const model::Principal& p : desired_.principals) {
    if (p.credential.kind != model::Credential::Kind::kPlain) continue;
    const std::string& hash = hashes.at(p.user);
    const std::optional<int> cost = model::HashCost(hash);
    if (!cost) continue;
    Result<std::string> digest =
        model::CredentialDigest(hasher_->DigestKeyAt(*cost), p.user, hash, p.credential.secret);
    if (digest.ok()) digests.emplace(p.user, std::move(*digest));
  }
  Result<model::RenderedUsersFile> file =
      model::RenderUsersFile(desired_, hashes, settings_.users_scope, digests);
  if (!file.ok()) {
    report.status = file.status();
    return false;
  }
  rendered_ = std::move(*file);
  state_ = RenderingState::kEstimate;
  return true;
}

// The note of the users file's drift entry when `plan` left passwords unhashed.
void Renderer::NoteUnhashed(PassReport& report) const {
  if (state_ != RenderingState::kEstimate || unhashed_for_plan_ == 0) return;
  for (DriftEntry& entry : report.plan.drift) {
    if (entry.kind != ObjectKind::kUsersFile) continue;
    std::string note = std::to_string(unhashed_for_plan_) +
                       " password(s) not proven by the file, left unhashed by plan (reconcile "
                       "hashes them)";
    if (other_cost_to_rehash_ > 0) {
      note += ": " + std::to_string(other_cost_to_rehash_) +
              " of them hashes of another cost to re-hash at cost " +
              std::to_string(settings_.bcrypt_cost) + " (--rehash)";
    }
    entry.note = entry.note.empty() ? note : entry.note + "; " + note;
  }
}

bool Renderer::RenderInline(PassReport& report) {
  const uint64_t calls_before = hasher_->bcrypt_calls();
  Result<model::RenderedUsersFile> file =
      model::RenderUsersFileCached(desired_, *hasher_, settings_.users_scope);
  if (!file.ok()) {
    report.status = file.status();
    return false;
  }
  report.passwords_hashed += static_cast<int64_t>(hasher_->bcrypt_calls() - calls_before);
  Log(LogLevel::kInfo, report.pass_id, "users file rendered",
      {{"entries", file->entries.size()}, {"passwords_hashed", report.passwords_hashed}});
  rendered_ = std::move(*file);
  state_ = RenderingState::kReady;
  return true;
}

bool Renderer::StartHashJob(PassReport& report, const std::string& existing,
                            const model::HashedCredentials& reusable) {
  const UserName own(settings_.bus.user);
  const uint64_t calls_before = hasher_->bcrypt_calls();
  state_ = RenderingState::kPending;
  rendered_ = {};
  if (!reusable.count(own)) {
    // The file lacks a (proven) entry of our own: without it the reconciler may not get in,
    // so that entry comes first, in an interim file that keeps every other entry the server
    // has now (its hash as written) until the job has hashed it.
    const model::HashedCredentials written = model::WrittenHashes(existing);
    model::DesiredState interim = desired_;
    model::HashedCredentials hashes;
    model::CredentialDigests digests;
    std::erase_if(interim.principals, [&](const model::Principal& p) {
      if (p.credential.kind == model::Credential::Kind::kNone) return false;
      const bool plain = p.credential.kind == model::Credential::Kind::kPlain;
      std::optional<std::string> hash;
      bool proven = false;
      if (!plain || p.user == own || reusable.count(p.user)) {
        Result<std::string> computed = hasher_->Hash(p.user, p.credential);  // cached but ours
        if (computed.ok()) {
          hash = std::move(*computed);
          proven = plain;
        }
      } else if (auto w = written.find(p.user); w != written.end()) {
        hash = w->second;
      }
      if (!hash) return true;  // neither hashed nor on disk: it waits for the job
      if (proven) {
        Result<std::string> digest = model::CredentialDigest(
            hasher_->DigestKeyAt(model::HashCost(*hash).value_or(hasher_->cost())), p.user, *hash,
            p.credential.secret);
        if (digest.ok()) digests.emplace(p.user, std::move(*digest));
      }
      hashes.emplace(p.user, std::move(*hash));
      return false;
    });
    Result<model::RenderedUsersFile> file =
        model::RenderUsersFile(interim, hashes, settings_.users_scope, digests);
    if (!file.ok()) return false;  // e.g. only our own entry: hash everything here instead
    report.passwords_hashed = static_cast<int64_t>(hasher_->bcrypt_calls() - calls_before);
    rendered_ = std::move(*file);
    state_ = RenderingState::kInterim;
  }

  job_ = std::make_unique<HashJob>();
  job_->from = *derived_from_;
  job_->desired = desired_;
  job_->pending = static_cast<int64_t>(hasher_->Uncached(desired_));
  job_->hasher = std::move(hasher_);
  const int64_t total = job_->pending.load();
  const uint64_t pass_id = report.pass_id;
  report.credentials_pending = total;
  Log(LogLevel::kInfo, pass_id, "hashing passwords in the background",
      {{"pending", total},
       {"threads", std::max(1u, std::thread::hardware_concurrency())},
       {"nice", kHashingNice},
       {"own_entry_first", state_ == RenderingState::kInterim}});
  if (background_->progress) background_->progress(total);
  StartHashThread(*job_, hashing_pause_, *background_, pass_id, settings_.users_scope);
  return true;
}

bool Renderer::CollectHashJob(PassReport& report) {
  job_->thread.join();
  hasher_ = std::move(job_->hasher);
  const bool same = derived_from_ == job_->from;
  Result<model::RenderedUsersFile> result = std::move(*job_->result);
  job_.reset();
  if (!same) return true;  // the records changed meanwhile: render again with this hasher
  if (!result.ok()) {
    report.status = result.status();
    return false;
  }
  rendered_ = std::move(*result);
  state_ = RenderingState::kReady;
  Log(LogLevel::kInfo, report.pass_id, "users file rendered",
      {{"entries", rendered_.entries.size()}, {"hashing", "background"}});
  return true;
}

void Renderer::StopHashJob() {
  mesh::reconciler::StopHashJob(job_, hashing_pause_);
}

HashingStop Renderer::StopHashJobWithin(std::chrono::milliseconds wait) {
  return mesh::reconciler::StopHashJobWithin(job_, hashing_pause_, wait);
}

bool Renderer::Rotate(std::string password) {
  if (password == own_password_) return false;
  // The job's hashes and its hasher's key belong to the old password: the hashes the users file
  // holds are proven with that key instead (Render), and only our own entry is hashed again.
  if (job_) {
    previous_key_ = job_->hasher->digest_key();
    StopHashJob();
  } else if (hasher_) {
    previous_key_ = hasher_->digest_key();
  }
  hasher_.reset();
  own_password_ = std::move(password);
  derived_from_.reset();  // our own entry changed: derive and render again
  return true;
}

}  // namespace mesh::reconciler
