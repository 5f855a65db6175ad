// application/x-www-form-urlencoded: Values, their parsing and encoding, and parse_form.
#include <goro/http/form.hpp>

#include <algorithm>

#include <goro/http/errors.hpp>
#include <goro/net/errors.hpp>

#include "access.hpp"
#include "forms/body_error.hpp"

namespace goro::http {

std::string_view Values::get(std::string_view name) const noexcept {
  for (const auto& [key, value] : entries_) {
    if (key == name) return value;
  }
  return {};
}

bool Values::has(std::string_view name) const noexcept {
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const auto& entry) { return entry.first == name; });
}

std::vector<std::string_view> Values::all(std::string_view name) const {
  std::vector<std::string_view> out;
  for (const auto& [key, value] : entries_) {
    if (key == name) out.emplace_back(value);
  }
  return out;
}

void Values::add(std::string name, std::string value) {
  entries_.emplace_back(std::move(name), std::move(value));
}

void Values::set(std::string_view name, std::string value) {
  auto first = std::find_if(entries_.begin(), entries_.end(),
                            [&](const auto& entry) { return entry.first == name; });
  if (first == entries_.end()) {
    entries_.emplace_back(std::string(name), std::move(value));
    return;
  }
  first->second = std::move(value);
  entries_.erase(std::remove_if(first + 1, entries_.end(),
                                [&](const auto& entry) { return entry.first == name; }),
                 entries_.end());
}

void Values::remove(std::string_view name) {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [&](const auto& entry) { return entry.first == name; }),
                 entries_.end());
}

namespace {

// Go's QueryEscape: unreserved bytes as they are, space as '+', the rest %XX.
void append_escaped(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else if (c == ' ') {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
}

bool is_urlencoded(std::string_view content_type) {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  return iequals(media, "application/x-www-form-urlencoded");
}

}  // namespace

std::string Values::encode() const {
  // Sorted by name as bytes, a name's values in the order held: Go's url.Values.Encode,
  // so the same values give the same text (a cache key, a signature's input).
  std::vector<const std::pair<std::string, std::string>*> sorted;
  sorted.reserve(entries_.size());
  for (const auto& entry : entries_) sorted.push_back(&entry);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto* a, const auto* b) { return a->first < b->first; });
  std::string out;
  for (const auto* entry : sorted) {
    if (!out.empty()) out.push_back('&');
    append_escaped(out, entry->first);
    out.push_back('=');
    append_escaped(out, entry->second);
  }
  return out;
}

bool parse_urlencoded(std::string_view text, Values& out, FormError* error) {
  bool all_valid = true;
  std::string key, value;
  detail::for_each_urlencoded_pair(text, [&](std::string_view pair, std::string_view raw_key,
                                             std::string_view raw_value) {
    if (!detail::percent_decode(raw_key, key, true) ||
        !detail::percent_decode(raw_value, value, true)) {
      if (all_valid && error != nullptr) {
        error->status = 400;
        error->message = "form: invalid %-escape in \"" +
                         std::string(pair.substr(0, std::min<std::size_t>(pair.size(), 64))) +
                         "\"";
      }
      all_valid = false;
      return true;
    }
    out.add(std::move(key), std::move(value));
    key.clear();
    value.clear();
    return true;
  });
  return all_valid;
}

Values query_values(const Request& req) {
  Values values;
  (void)parse_urlencoded(req.raw_query(), values);
  return values;
}

namespace detail {

FormError body_read_error(std::error_code ec, const char* what) {
  FormError error;
  if (ec == errc::body_too_large) {
    error.status = 413;
    error.message = std::string(what) + ": the body is larger than the server's max_body_bytes";
  } else if (net::is_timeout(ec)) {
    error.status = 408;
    error.message = std::string(what) + ": the body did not arrive in time";
  } else if (ec == errc::unexpected_eof) {
    error.status = 400;
    error.message = std::string(what) + ": the body was cut short (truncated)";
  } else {
    error.status = 400;
    error.message = std::string(what) + ": reading the body failed: " + ec.message();
  }
  return error;
}

}  // namespace detail

bool parse_form(Request& req, Values& out, const FormLimits& limits, FormError* error) {
  FormError local;
  FormError& err = error != nullptr ? *error : local;
  if (is_urlencoded(req.header("content-type"))) {
    if (req.content_length() >= 0 &&
        static_cast<std::uint64_t>(req.content_length()) > limits.max_urlencoded_bytes) {
      err = {413, "form: the body is larger than max_urlencoded_bytes (" +
                      std::to_string(limits.max_urlencoded_bytes) + ")"};
      return false;
    }
    std::string body;
    char buf[16384];
    while (true) {
      Result<std::size_t> n = req.read(buf, sizeof buf);
      if (!n) {
        err = detail::body_read_error(n.error(), "form");
        return false;
      }
      if (*n == 0) break;
      if (body.size() + *n > limits.max_urlencoded_bytes) {
        err = {413, "form: the body is larger than max_urlencoded_bytes (" +
                        std::to_string(limits.max_urlencoded_bytes) + ")"};
        return false;
      }
      body.append(buf, *n);
    }
    if (!parse_urlencoded(body, out, &err)) return false;
  }
  if (!parse_urlencoded(req.raw_query(), out, &err)) {
    err.message.insert(0, "query: ");
    return false;
  }
  return true;
}

std::error_code send_form_error(Request& req, ResponseWriter& w, const FormError& error) {
  const int status = error.status != 0 ? error.status : 400;
  return detail::send_builtin_error(req, w, status, detail::default_error_body(status, error.message),
                                    error.message, "form");
}

bool parse_form_or_400(Request& req, ResponseWriter& w, Values& out, const FormLimits& limits) {
  FormError error;
  if (parse_form(req, out, limits, &error)) return true;
  (void)send_form_error(req, w, error);
  return false;
}

}  // namespace goro::http
