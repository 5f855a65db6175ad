#include <goro/http/errors.hpp>

#include <string>

namespace goro::http {
namespace {

class HttpCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "goro.http"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::body_too_large: return "body too large";
      case errc::malformed_body: return "malformed body framing";
      case errc::unexpected_eof: return "connection closed before the message ended";
      case errc::response_finished: return "response already finished";
      case errc::handler_timeout: return "handler timed out; response already sent";
      case errc::content_length_exceeded: return "body longer than its Content-Length";
      case errc::malformed_response: return "malformed HTTP response";
      case errc::bad_url: return "unsupported or malformed URL";
      case errc::too_many_redirects: return "too many redirects";
      case errc::server_closed: return "server closed";
      case errc::shutdown_timeout: return "shutdown deadline passed with connections open";
      case errc::header_too_large: return "response header fields too large";
      case errc::invalid_request: return "invalid character in the request method or a header";
      case errc::not_supported: return "not supported by this response writer";
      case errc::cannot_take_over: return "the connection cannot be taken over now";
      case errc::invalid_status: return "not an informational (1xx) status";
      case errc::http2_required: return "the server does not speak HTTP/2";
      case errc::stream_reset: return "HTTP/2 stream reset by the server";
      case errc::connection_lost: return "HTTP/2 connection lost";
      case errc::request_finished: return "the request body has ended";
    }
    return "unknown goro.http error";
  }
};

}  // namespace

const std::error_category& http_category() noexcept {
  static const HttpCategory category;
  return category;
}

std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), http_category()}; }

}  // namespace goro::http
