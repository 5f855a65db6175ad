#include <goro/http/json.hpp>

#include <goro/http/error_reply.hpp>
#include <goro/http/errors.hpp>
#include <goro/net/errors.hpp>

namespace goro::http {
namespace {

class JsonCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "goro.json"; }
  std::string message(int value) const override {
    switch (static_cast<json_errc>(value)) {
      case json_errc::not_json_content_type: return "Content-Type is not JSON";
      case json_errc::empty_body: return "empty body where JSON was expected";
      case json_errc::malformed_json: return "malformed JSON";
      case json_errc::too_deep: return "JSON nested too deeply";
      case json_errc::wrong_shape: return "JSON value of the wrong shape";
    }
    return "unknown goro.json error";
  }
};

// A message may quote the client's bytes (nlohmann's "last read: '...'" holds the whole
// token, which can be a megabyte-long string): keep a reply's error short.
constexpr std::size_t kMaxQuoted = 200;

std::error_code fail(json_errc e, JsonError* error, std::size_t byte, std::string_view what) {
  std::error_code ec = make_error_code(e);
  if (error != nullptr) {
    error->code = ec;
    error->byte = byte;
    error->message.assign(what.substr(0, kMaxQuoted));
    if (what.size() > kMaxQuoted) error->message += "...";
  }
  return ec;
}

// nlohmann's what() without its "[json.exception.parse_error.101] " tag, and for a parse
// error without its "parse error at line 1, column 9: " too (the caller names the byte).
std::string_view explanation(const nlohmann::json::exception& e) {
  std::string_view what = e.what();
  if (!what.empty() && what.front() == '[') {
    if (std::size_t end = what.find("] "); end != std::string_view::npos) what.remove_prefix(end + 2);
  }
  if (what.starts_with("parse error")) {
    if (std::size_t colon = what.find(": "); colon != std::string_view::npos) what.remove_prefix(colon + 2);
  }
  return what;
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals_ascii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// application/json, or application/<anything>+json (RFC 6839), parameters ignored.
bool is_json_media_type(std::string_view value) {
  value = value.substr(0, value.find(';'));
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  constexpr std::string_view kApplication = "application/";
  if (value.size() <= kApplication.size() ||
      !iequals_ascii(value.substr(0, kApplication.size()), kApplication))
    return false;
  std::string_view subtype = value.substr(kApplication.size());
  if (iequals_ascii(subtype, "json")) return true;
  return subtype.size() > 5 && iequals_ascii(subtype.substr(subtype.size() - 5), "+json");
}

// The 0-based offset of the bracket that opens nesting level max_depth + 1, or npos.
// Counts brackets outside strings only; on malformed input the answer may be wrong, but
// the parser refuses that input anyway, and on well-formed input it is exact.
std::size_t too_deep_at(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

bool only_white_space(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

}  // namespace

const std::error_category& json_category() noexcept {
  static const JsonCategory category;
  return category;
}

std::error_code make_error_code(json_errc e) noexcept { return {static_cast<int>(e), json_category()}; }

std::error_code write_json(ResponseWriter& w, const nlohmann::json& value, int status) {
  std::string body = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  body.push_back('\n');
  return w.json(body, status);
}

std::error_code write_json_error(ResponseWriter& w, int status, std::string_view message) {
  return write_json(w, nlohmann::json{{"error", message}}, status);
}

Result<nlohmann::json> read_json(Request& req, JsonError* error) {
  if (req.has_header("content-type")) {
    std::string_view type = req.header("content-type");
    if (!is_json_media_type(type)) {
      std::string what = "Content-Type ";
      what += type.substr(0, kMaxQuoted);
      what += " is not JSON (application/json)";
      return fail(json_errc::not_json_content_type, error, 0, what);
    }
  }
  Result<std::string> body = req.body();
  if (!body) {
    if (error != nullptr) {
      error->code = body.error();
      error->byte = 0;
      error->message = "reading the body: " + body.error().message();
    }
    return body.error();
  }
  if (only_white_space(*body)) return fail(json_errc::empty_body, error, 0, "request body is empty");
  if (std::size_t at = too_deep_at(*body, json_max_depth); at != std::string_view::npos) {
    return fail(json_errc::too_deep, error, at + 1,
                "JSON nested deeper than " + std::to_string(json_max_depth) + " levels at byte " +
                    std::to_string(at + 1));
  }
  try {
    return nlohmann::json::parse(*body);
  } catch (const nlohmann::json::parse_error& e) {
    if (error == nullptr) return make_error_code(json_errc::malformed_json);
    return fail(json_errc::malformed_json, error, e.byte,
                "malformed JSON at byte " + std::to_string(e.byte) + ": " +
                    std::string(explanation(e)));
  }
}

namespace detail {

std::error_code json_wrong_shape(const nlohmann::json::exception& e, JsonError* error) {
  return fail(json_errc::wrong_shape, error, 0,
              "JSON of the wrong shape: " + std::string(explanation(e)));
}

void refuse_json_body(Request& req, ResponseWriter& w, const JsonError& error) {
  int status = 400;
  if (error.code == json_errc::not_json_content_type) {
    status = 415;
  } else if (error.code == errc::body_too_large) {
    status = 413;
  } else if (net::is_timeout(error.code)) {
    status = 408;
  }
  // After a body too large or cut short the server has answered by itself and this
  // write fails with errc::response_finished: nothing more to do either way.
  FrameworkReply reply;
  reply.status = status;
  reply.content_type = "application/json";
  reply.body = nlohmann::json{{"error", error.message}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  reply.body.push_back('\n');
  reply.message = error.message;
  reply.origin = "json";
  (void)send_error(req, w, std::move(reply));
}

}  // namespace detail

}  // namespace goro::http
