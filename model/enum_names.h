// One table per enum: each enumerator's spelling, written once and used for logs, JSON, metric
// labels and parsing alike, so that whatever is written can be read back.
//
//   enum class Color { kRed, kGreen };
//   inline constexpr EnumNames<Color, 2> kColorNames{{{
//       {Color::kRed, "red"},
//       {Color::kGreen, "green"},
//   }}};
//   static_assert(kColorNames.Dense());
//
// A table lists the enumerators in order from 0, each once, with distinct spellings: Dense()
// checks that at compile time, so a gap or a reordering does not build. An enumerator added at
// the end and left out of its table is caught by tests/model/enum_names_test.cc, whose switch
// over every enumerator (-Werror=switch) does not build until it is listed there, and which
// then requires it to round-trip.
//
// Thread-safety: constant data.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mesh {

template <typename E>
struct Spelling {
  E value;
  const char* name;
};

template <typename E, std::size_t N>
struct EnumNames {
  std::array<Spelling<E>, N> spellings;

  // The spelling of `v`; "unknown" for a value outside the table (a cast integer).
  constexpr const char* Name(E v) const {
    for (const Spelling<E>& s : spellings) {
      if (s.value == v) return s.name;
    }
    return "unknown";
  }
  // The enumerator spelled `text`, exactly; nullopt for any other text.
  constexpr std::optional<E> Parse(std::string_view text) const {
    for (const Spelling<E>& s : spellings) {
      if (text == s.name) return s.value;
    }
    return std::nullopt;
  }
  // Enumerators 0..N-1 in order, spellings non-empty and distinct.
  constexpr bool Dense() const {
    for (std::size_t i = 0; i < N; ++i) {
      if (static_cast<std::size_t>(spellings[i].value) != i) return false;
      if (std::string_view(spellings[i].name).empty()) return false;
      for (std::size_t j = 0; j < i; ++j) {
        if (std::string_view(spellings[i].name) == spellings[j].name) return false;
      }
    }
    return true;
  }
  constexpr auto begin() const { return spellings.begin(); }
  constexpr auto end() const { return spellings.end(); }
  static constexpr std::size_t size() { return N; }
};

// The spellings in enumerator order (a flag's accepted words, for --help and completion).
template <typename E, std::size_t N>
std::vector<std::string> WordsOf(const EnumNames<E, N>& names) {
  std::vector<std::string> words;
  for (const Spelling<E>& s : names) words.emplace_back(s.name);
  return words;
}

}  // namespace mesh
