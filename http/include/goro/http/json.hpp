// goro::http JSON bodies: read a request's JSON body into a value, write a value as a
// JSON response, through nlohmann/json (Debian's nlohmann-json3-dev, header only).
//
//   struct User { std::int64_t id = 0; std::string name, email; };
//   NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(User, id, name, email)   // or to_json/from_json
//
//   r.handle("POST /users", [](goro::http::Request& req, goro::http::ResponseWriter& w) {
//     User u;
//     if (!goro::http::decode_or_400(req, w, u)) return;  // 400/413/415 {"error": "..."}
//                                                          // (shape_reply reshapes it)
//     ...
//     goro::http::write_json(w, u, 201);
//   });
//
// Library goro::json (CMake: find_package(goro COMPONENTS json) +
// target_link_libraries(app PRIVATE goro::json)). It is built only where CMake finds
// nlohmann_json 3; nothing else in goro depends on it, and <goro/http/http.hpp> does
// not include this header.
//
// Types convert the way nlohmann/json converts them: a type T is readable and writable
// when to_json(nlohmann::json&, const T&) and from_json(const nlohmann::json&, T&) are
// found by argument-dependent lookup (in T's namespace, or generated there by the
// NLOHMANN_DEFINE_TYPE_* macros), or through an nlohmann::adl_serializer<T>.
//
// Like the rest of goro these functions report errors as values: no exception from
// nlohmann/json leaves them (std::bad_alloc and exceptions a user's from_json throws
// that are not nlohmann's own still do).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include <goro/http/request.hpp>
#include <goro/http/response.hpp>
#include <goro/base/result.hpp>

namespace goro::http {

// Errors of reading a JSON body, in the "goro.json" category. Failures to read the body
// itself keep their own codes (errc::body_too_large, a timeout, ...).
enum class json_errc {
  // The request has a Content-Type and it is neither application/json nor a
  // "+json" type such as application/problem+json. Answered 415.
  not_json_content_type = 1,
  // The body is empty (or only white space). Answered 400.
  empty_body,
  // The body is not one well-formed JSON text: bad syntax, invalid UTF-8 inside a
  // string, or anything after the value. Answered 400.
  malformed_json,
  // Arrays and objects nested deeper than json_max_depth. Answered 400.
  too_deep,
  // Well-formed JSON that does not convert to the type asked for: a member missing or of
  // the wrong type (nlohmann's type_error and out_of_range from get<T>()). Answered 400.
  wrong_shape,
};

const std::error_category& json_category() noexcept;
std::error_code make_error_code(json_errc e) noexcept;

}  // namespace goro::http

template <>
struct std::is_error_code_enum<goro::http::json_errc> : std::true_type {};

namespace goro::http {

// The deepest nesting of arrays and objects read_json accepts. Parsing is iterative in
// nlohmann/json, but copying, comparing, dumping and converting a value recurse once
// per level, and a goroutine's stack has a fixed size (256 KiB by default) that a
// client must not be able to exhaust with "[[[[...". Go's encoding/json stops at 10,000
// levels on stacks that grow; real documents rarely pass 20.
inline constexpr std::size_t json_max_depth = 128;

// What went wrong, for a person: filled by read_json / read_json_as on failure when the
// caller passes one. The error code says which problem it was; this says where.
struct JsonError {
  // The same error the call returned.
  std::error_code code{};
  // malformed_json and too_deep: the 1-based offset in the body of the byte where
  // reading stopped (nlohmann's parse_error::byte). 0 for the other errors.
  std::size_t byte = 0;
  // One line naming the problem, e.g. "malformed JSON at byte 9: syntax error while
  // parsing object key - unexpected '}'; expected string literal" or "Content-Type
  // text/plain is not JSON". It may quote a little of the body (at most 200 bytes).
  std::string message;
};

// Writes value as the response body, serialised compactly and followed by "\n" (as Go's
// json.Encoder writes), with status and Content-Type application/json unless the
// handler set a Content-Type already. Strings holding invalid UTF-8 are written with
// U+FFFD in place of the bad bytes, as Go does; nothing throws but std::bad_alloc.
// Returns ResponseWriter::write's error.
std::error_code write_json(ResponseWriter& w, const nlohmann::json& value, int status = 200);

// The same for any value nlohmann::json can be made from: a type with to_json, a
// standard container, a string, a number.
template <class T>
  requires(!std::is_same_v<std::remove_cvref_t<T>, nlohmann::json> &&
           std::is_constructible_v<nlohmann::json, const T&>)
std::error_code write_json(ResponseWriter& w, const T& value, int status = 200) {
  return write_json(w, nlohmann::json(value), status);
}

// Writes {"error": message} with status (a JSON error reply, as a Go JSON API sends).
std::error_code write_json_error(ResponseWriter& w, int status, std::string_view message);

// Reads the whole body (bounded by ServerOptions::max_body_bytes, as Request::body()
// is; parks while the client sends it) and parses it as one JSON text. Before reading,
// a Content-Type that is present must be application/json or a "+json" type (media
// type parameters such as charset are ignored: JSON is UTF-8); a request without one
// is read as JSON, as Go's json.Decoder reads any body. Errors: json_errc (see above),
// or Request::body()'s (errc::body_too_large, errc::malformed_body, a timeout, ...).
// With error, fills it on failure.
Result<nlohmann::json> read_json(Request& req, JsonError* error = nullptr);

namespace detail {
// Makes a wrong_shape error from the exception a conversion threw, filling error.
std::error_code json_wrong_shape(const nlohmann::json::exception& e, JsonError* error);
// Answers a body that read_json_as refused: 415, 413, 408 or 400 with {"error": ...}.
void refuse_json_body(Request& req, ResponseWriter& w, const JsonError& error);
}  // namespace detail

// read_json, then converts the value to T (from_json; T default-constructible, or with
// an adl_serializer<T>::from_json returning T). A value of the wrong shape is
// json_errc::wrong_shape, with nlohmann's explanation in error->message ("type must be
// string, but is number", "key 'email' not found").
template <class T>
Result<T> read_json_as(Request& req, JsonError* error = nullptr) {
  Result<nlohmann::json> value = read_json(req, error);
  if (!value) return value.error();
  try {
    return value->template get<T>();
  } catch (const nlohmann::json::exception& e) {
    return detail::json_wrong_shape(e, error);
  }
}

// Reads the body into out the way a Go handler decodes one, answering a bad body itself:
// true with out set, or false after writing {"error": "<what was wrong>"} with 415 (not
// JSON), 413 (past max_body_bytes; the server may have answered so already), 408 (the
// body did not arrive in time) or 400 (anything else: empty, malformed, too deep, wrong
// shape, cut short), shaped by ServerOptions::shape_reply (origin "json"; error_reply.hpp)
// when one is set. out is unchanged when it returns false. The handler should return.
template <class T>
[[nodiscard]] bool decode_or_400(Request& req, ResponseWriter& w, T& out) {
  JsonError error;
  Result<T> value = read_json_as<T>(req, &error);
  if (!value) {
    detail::refuse_json_body(req, w, error);
    return false;
  }
  out = std::move(*value);
  return true;
}

}  // namespace goro::http
