// TLS for the daemon's HTTP listener (--tls-cert / --tls-key): a server context built from a PEM
// certificate chain (the leaf first, then any intermediates) and its PEM private key, speaking
// TLS 1.2 or later only, without compression or renegotiation. A passphrase-protected key is
// refused (nobody is there to type the passphrase).
//
// Reload (cert-manager rotates the files; Kubernetes swaps a Secret volume's "..data" link):
// Current(), called for each new connection, stats both files (following links) and, when
// either one's identity (device, inode, size, mtime, ctime) differs from the last attempt,
// builds a new context and swaps it in for the connections that follow; connections already
// open keep the context they started with. A failed reload (unreadable file, bad PEM, a key that
// does not match the certificate) keeps the previous context in force and logs a warning naming
// the files and OpenSSL's reason, never their content; it is not retried until a file changes
// again. (A file rewritten in place twice within one filesystem timestamp tick at the same size
// is noticed at its next change: replace files by rename, as Kubernetes does.)
//
// Ownership: ListenerTls owns the context in force; every connection shares the context it
// started with (shared_ptr) until it ends. Thread-safety: every method may be called from any
// thread (the state is guarded by a mutex; a reload runs under it).
#pragma once

#include <sys/stat.h>

#include <memory>
#include <mutex>
#include <string>

#include "model/result.h"
#include "model/thread_safety.h"
#include "observers/certificate.h"

namespace boost::asio::ssl {
class context;
}

namespace mesh::reconciler {

class ListenerTls {
 public:
  // Loads both files; an error names the file and OpenSSL's reason (the daemon exits 1 on it).
  static Result<std::shared_ptr<ListenerTls>> Load(std::string cert_file, std::string key_file);

  // The context for a new connection, reloaded first when a file changed (see above).
  std::shared_ptr<boost::asio::ssl::context> Current();
  // The leaf certificate of the context in force.
  observers::CertificateFacts certificate() const;

  const std::string& cert_file() const { return cert_file_; }
  const std::string& key_file() const { return key_file_; }

 private:
  // A file's identity as stat(2) reports it; all zero when it cannot be stat'ed.
  struct FileStamp {
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = 0;
    timespec mtime{};
    timespec ctime{};
    bool operator==(const FileStamp& other) const;
  };
  static FileStamp StampOf(const std::string& path);

  ListenerTls(std::string cert_file, std::string key_file)
      : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)) {}

  const std::string cert_file_;
  const std::string key_file_;
  mutable Mutex mutex_;
  std::shared_ptr<boost::asio::ssl::context> context_ GUARDED_BY(mutex_);
  observers::CertificateFacts certificate_ GUARDED_BY(mutex_);
  FileStamp cert_stamp_ GUARDED_BY(mutex_);  // of the last load attempt
  FileStamp key_stamp_ GUARDED_BY(mutex_);
};

}  // namespace mesh::reconciler
