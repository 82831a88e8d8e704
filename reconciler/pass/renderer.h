// The desired state and the users file a pass works from: derived from the records only when
// they change, and rendered inline (the CLI), by a background job (the daemon, hash_job.h), or
// without bcrypt for `plan`, reusing every hash the users file on disk proves. It holds the
// reconciler's own password as the users file renders it (the hasher's key), and after a
// rotation the key the file was written with until the server has loaded the new one.
//
// Thread-safety: the pass's thread only. The background job's threads own what the job holds
// (hash_job.h) until the pass collects or stops it; HashingPause is safe from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "model/desired.h"
#include "model/records.h"
#include "model/users_file.h"
#include "observers/observer.h"
#include "reconciler/pass/hash_job.h"
#include "reconciler/pass/pass.h"
#include "reconciler/pass/pass_settings.h"
#include "reconciler/pass/report.h"

namespace mesh::reconciler {

// What rendered() is: the users file for desired() (kReady), an interim file with the
// reconciler's own entry (kInterim), nothing yet while the job hashes (kPending), or `plan`'s
// rendering without bcrypt (kEstimate, never written).
enum class RenderingState { kReady, kInterim, kPending, kEstimate };

class Renderer {
 public:
  // `settings` must outlive the renderer (the pass's own); `observer` reads the users file.
  Renderer(const PassSettings& settings, std::string own_password,
           std::shared_ptr<observers::Observer> observer,
           std::optional<BackgroundHashing> background);
  ~Renderer();  // stops the background job
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  // Derives the desired state from `records` unless it was derived from this `generation` of
  // them (the caller's count of the times its records changed), and renders (or starts the job
  // that renders) the users file when it is not ready. False, with report.status set, when the
  // pass cannot go on.
  bool DeriveAndRender(PassReport& report, const model::Records& records, uint64_t generation);
  // The note of the users file's drift entry when `plan` left passwords unhashed.
  void NoteUnhashed(PassReport& report) const;

  // A rotated password: from now on it is rendered, and the hashes the users file holds are
  // proven with the old key (kept until ForgetPreviousKey). False when it is the same.
  bool Rotate(std::string password);
  // The server has loaded a users file with the rotated password (or none was under way).
  void ForgetPreviousKey() { previous_key_.reset(); }
  // Cancels the background job and waits up to `wait` for the hashes under way.
  HashingStop StopHashJobWithin(std::chrono::milliseconds wait);

  const std::string& own_password() const { return own_password_; }
  const model::DesiredState& desired() const { return desired_; }
  const model::RenderedUsersFile& rendered() const { return rendered_; }
  RenderingState state() const { return state_; }
  // Held while a pass applies JetStream actions: the background job waits.
  HashingPause& hashing_pause() { return hashing_pause_; }

 private:
  bool Render(PassReport& report);
  // Renders inline from the hasher's cache (Render has adopted what the file proves), hashing
  // whatever is missing; the hasher must be here (not in a job).
  bool RenderInline(PassReport& report);
  // `plan` (the CLI's observe-only pass): renders without bcrypt, marking what is not proven.
  bool RenderForPlan(PassReport& report);
  // Starts the background job for `desired_`; first gives `rendered_` the interim file when the
  // users file on disk lacks (a proven) entry of the reconciler's own. False: render inline.
  bool StartHashJob(PassReport& report, const std::string& existing,
                    const model::HashedCredentials& reusable);
  // Takes back the hasher (and the rendering when it is for `desired_`) of a finished job.
  bool CollectHashJob(PassReport& report);
  void StopHashJob();

  const PassSettings& settings_;
  const std::shared_ptr<observers::Observer> observer_;
  const std::optional<BackgroundHashing> background_;
  // The reconciler's own password as the users file renders it (its entry, the hasher's key).
  std::string own_password_;
  // The key the users file's digests were written with before a rotation, until the server has
  // loaded a file written with the new one: what it proves is reused, not hashed again.
  std::optional<model::DigestKey> previous_key_;
  std::unique_ptr<model::BcryptHasher> hasher_;  // cached across passes
  // The desired state and the users file rendered from the records' generation `derived_from_`:
  // kept while the records stay the same, so that a pass over unchanged records neither derives
  // nor renders again. A generation, not a copy of the records: at ten times the Large mesh the
  // records are 5 MiB, and comparing them took every pass a walk over all of it.
  std::optional<uint64_t> derived_from_;
  model::DesiredState desired_;
  model::RenderedUsersFile rendered_;
  RenderingState state_ = RenderingState::kPending;
  int64_t unhashed_for_plan_ = 0;     // RenderForPlan's marked entries
  int64_t other_cost_kept_ = 0;       // proven hashes of another cost, kept (Render)
  int64_t other_cost_to_rehash_ = 0;  // the same with --rehash: to hash again
  HashingPause hashing_pause_;
  std::unique_ptr<HashJob> job_;
};

}  // namespace mesh::reconciler
