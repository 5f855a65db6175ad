#include <goro/http/content_coding.hpp>

#include <goro/http/headers.hpp>

namespace goro::http {
namespace {

constexpr std::string_view kSpace = " \t";

std::string_view trim(std::string_view s) noexcept {
  const auto first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(kSpace);
  return s.substr(first, last - first + 1);
}

// A qvalue (RFC 9110 §12.4.2): "0" ["." 0*3DIGIT] or "1" ["." 0*3("0")], in
// thousandths; -1 when malformed.
int parse_qvalue(std::string_view v) noexcept {
  if (v.empty() || (v[0] != '0' && v[0] != '1')) return -1;
  int whole = v[0] - '0';
  if (v.size() == 1) return whole * 1000;
  if (v[1] != '.' || v.size() > 5) return -1;
  int thousandths = 0;
  int scale = 100;
  for (char c : v.substr(2)) {
    if (c < '0' || c > '9') return -1;
    thousandths += (c - '0') * scale;
    scale /= 10;
  }
  if (whole == 1 && thousandths != 0) return -1;
  return whole * 1000 + thousandths;
}

struct Entry {
  std::string_view coding;
  int weight = -1;  // -1: malformed, skip
};

// One element of the list: `coding *( OWS ";" OWS name "=" value )`.
Entry parse_entry(std::string_view element) noexcept {
  Entry e;
  const auto semi = element.find(';');
  e.coding = trim(element.substr(0, semi));
  if (e.coding.empty()) return e;
  if (iequals(e.coding, "x-gzip")) e.coding = "gzip";
  e.weight = 1000;
  std::string_view params = semi == std::string_view::npos ? std::string_view{}
                                                           : element.substr(semi + 1);
  while (!params.empty()) {
    const auto next = params.find(';');
    const std::string_view param = trim(params.substr(0, next));
    params = next == std::string_view::npos ? std::string_view{} : params.substr(next + 1);
    const auto eq = param.find('=');
    if (eq == std::string_view::npos) return {e.coding, -1};
    if (!iequals(trim(param.substr(0, eq)), "q")) continue;
    e.weight = parse_qvalue(trim(param.substr(eq + 1)));
    if (e.weight < 0) return {e.coding, -1};
  }
  return e;
}

// Calls f(entry) for each well-formed element of the comma-separated list.
template <typename F>
void for_each_entry(std::string_view list, F&& f) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    const Entry e = parse_entry(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (e.weight >= 0) f(e);
  }
}

}  // namespace

int accept_weight(std::string_view accept_encoding, std::string_view coding) noexcept {
  int named = -1;
  int star = -1;
  for_each_entry(accept_encoding, [&](const Entry& e) {
    if (iequals(e.coding, coding)) {
      if (named < 0) named = e.weight;
    } else if (e.coding == "*" && star < 0) {
      star = e.weight;
    }
  });
  return named >= 0 ? named : star;
}

std::string_view negotiate_encoding(std::string_view accept_encoding,
                                    std::span<const std::string_view> offered) noexcept {
  std::string_view best;
  int best_weight = 0;
  for (std::string_view coding : offered) {
    const int w = accept_weight(accept_encoding, coding);
    if (w > best_weight) {
      best = coding;
      best_weight = w;
    }
  }
  return best;
}

bool identity_acceptable(std::string_view accept_encoding) noexcept {
  return accept_weight(accept_encoding, "identity") != 0;
}

}  // namespace goro::http
