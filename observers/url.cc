#include "observers/url.h"

namespace mesh::observers {

std::string StripUserInfo(std::string_view url) {
  const size_t scheme_end = url.find("://");
  const size_t authority_begin = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const size_t authority_end = url.find_first_of("/?#", authority_begin);
  const std::string_view authority = url.substr(
      authority_begin, authority_end == std::string_view::npos ? std::string_view::npos
                                                               : authority_end - authority_begin);
  const size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  std::string stripped(url.substr(0, authority_begin));
  stripped += url.substr(authority_begin + at + 1);
  return stripped;
}

}  // namespace mesh::observers
