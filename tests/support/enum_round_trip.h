// Every enumerator of an enum, spelled by its table (model/enum_names.h) and read back.
//
// An enum's test lists its enumerators in a switch without a default, `bool Listed(E)`; with
// -Wswitch an error in the files that include this header, an enumerator added to the enum
// does not build until it is listed there, and RequireRoundTrip then requires the table to
// spell it and read it back.
//
// Thread-safety: test helpers, one test thread.
#pragma once

#include <catch2/catch.hpp>
#include <cstddef>
#include <string>
#include <vector>

#include "model/enum_names.h"

#pragma GCC diagnostic error "-Wswitch"

namespace mesh::testing {

// The values 0..63 of E that `listed` accepts: the enumerators its switch names.
template <typename E>
std::vector<E> ListedEnumerators(bool (*listed)(E)) {
  std::vector<E> all;
  for (int i = 0; i < 64; ++i) {
    if (listed(static_cast<E>(i))) all.push_back(static_cast<E>(i));
  }
  return all;
}

template <typename E, std::size_t N>
void RequireRoundTrip(const EnumNames<E, N>& names, bool (*listed)(E)) {
  const std::vector<E> all = ListedEnumerators(listed);
  CHECK(all.size() == N);  // the table has every enumerator, and nothing else
  for (E v : all) {
    const std::string name = names.Name(v);
    INFO("enumerator " << static_cast<int>(v) << " spelled \"" << name << "\"");
    CHECK(names.Parse(name) == v);
  }
  CHECK(!names.Parse("").has_value());
  CHECK(std::string(names.Name(static_cast<E>(N))) == "unknown");
}

}  // namespace mesh::testing
