// Owning pointers for C libraries' handles (cnats, OpenSSL): a std::unique_ptr whose deleter
// is the library's own destroy function, named once in the handle's type:
//
//   using X509Ptr = CHandle<X509, X509_free>;
//   X509Ptr certificate(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
//
// Wrap the handle on the line after the call that created it, so that no early return can leak
// it. The deleter is stateless (the pointer stays pointer-sized) and is not called on nullptr.
// Thread-safety: that of the handle itself; the wrapper adds none and needs none.
#pragma once

#include <memory>

namespace mesh {

template <auto Destroy>
struct CDestroy {
  template <typename T>
  void operator()(T* p) const {
    Destroy(p);
  }
};

template <typename T, auto Destroy>
using CHandle = std::unique_ptr<T, CDestroy<Destroy>>;

}  // namespace mesh
