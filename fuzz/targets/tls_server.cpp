// tls_server: the TLS record path through the server. The input (after its settings
// byte) is everything a TLS client sends: garbage, a truncated or altered ClientHello,
// records after it. A net::TlsConn server side runs over an in-memory stream with
// http::Server::serve_conn on top, as Server::serve(TlsListener&) serves a connection.
// It must end without a crash or a hang, and what it sends must be whole TLS records
// (an alert, a ServerHello flight), none cut or interleaved.
//
// Settings byte: bits 0-1 how the input is split into reads (read_steps).
#include <memory>
#include <string>

#include <goro/http/server.hpp>
#include <goro/net/tls.hpp>

#include "harness.hpp"
#include "memory_stream.hpp"
#include "test_certs.hpp"

namespace goro::fuzz {
namespace {

// Certificates made once per process; a second name tries the SNI choice.
std::shared_ptr<net::TlsContext> server_context() {
  static net::testing::TestPki pki;
  static std::shared_ptr<net::TlsContext> context = [] {
    net::TlsConfig config;
    config.certificates.push_back(pki.leaf("default", {"localhost"}));
    config.certificates.push_back(pki.leaf("other", {"other.example", "*.wild.example"}));
    config.alpn = {"http/1.1"};
    Result<std::shared_ptr<net::TlsContext>> made = net::TlsContext::server(config);
    if (!made) std::abort();
    return *made;
  }();
  return context;
}

// Whether out is a sequence of whole TLS records (RFC 8446 5.1).
bool whole_records(std::string_view out) {
  while (!out.empty()) {
    if (out.size() < 5) return false;
    // The version field is not checked: OpenSSL's alert to a ClientHello of an
    // unknown version carries that version.
    const auto type = static_cast<unsigned char>(out[0]);
    const std::size_t length = static_cast<std::size_t>(static_cast<unsigned char>(out[3])) << 8 |
                               static_cast<unsigned char>(out[4]);
    if (type < 20 || type > 23 || length > (1 << 14) + 256) return false;
    if (out.size() < 5 + length) return false;
    out.remove_prefix(5 + length);
  }
  return true;
}

}  // namespace

std::string tls_server(std::string_view input) {
  if (input.empty()) return {};
  const auto settings = static_cast<std::uint8_t>(input[0]);
  input.remove_prefix(1);
  std::shared_ptr<net::TlsContext> context = server_context();
  std::string output;
  std::string failure;
  on_goroutine([&] {
    Result<net::TlsConn> conn = net::TlsConn::server(
        std::make_unique<MemoryStream>(input, read_steps(settings), output), context);
    if (!conn) {
      failure = "TlsConn::server: " + conn.error().message();
      return;
    }
    http::ServerOptions options;
    options.error_log = [](std::string_view) {};
    http::Server server(options, [](http::Request&, http::ResponseWriter& w) { w.text("ok"); });
    server.serve_conn(std::make_unique<net::TlsConn>(std::move(*conn)));
  });
  if (!failure.empty()) return failure;
  if (!whole_records(output)) return "the server sent something other than whole TLS records";
  return {};
}

}  // namespace goro::fuzz
