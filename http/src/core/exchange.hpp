// The exchange runner: the server's rules for one request, written once for every
// protocol. An engine (h1/, h2/) reads a request, prepares its Request and Response, and
// calls run_exchange; the runner applies the asterisk-form rule, runs the handler chain,
// turns an exception into a 500 (or abandons a response already begun), ends the
// request's context and counts the request. The server's own replies (400, 408, 413, ...)
// are built here too (build_own_reply), through ServerOptions::shape_reply and
// on_error_reply, and only framed by the engine.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include <goro/http/error_reply.hpp>
#include <goro/http/headers.hpp>
#include <goro/http/request.hpp>

#include "core/response.hpp"
#include "core/server_impl.hpp"

namespace goro::http::detail {

// What the server says on its own, for every protocol: the status, the fields
// (X-Request-Id, what shape_reply and on_error_reply added; never Content-Length,
// Transfer-Encoding or Connection: the framing's), the body, "413 Payload Too Large:
// request body too large\n" unless shaped, and its type.
struct OwnReply {
  int status = 0;
  Headers fields;
  std::string content_type;
  std::string body;
};

// What is known of a request the server refuses, for on_error_reply: its method, target
// and fields once its target was read, else nothing.
struct RefusedRequest {
  std::string_view method;
  std::string_view target;
  std::span<const HeaderField> headers;
};

// Builds the reply for status and message (the hooks run here, on the calling goroutine;
// an exception from one is logged and ignored).
void build_own_reply(const Server::Impl& server, std::string_view remote_addr, int status,
                     std::string_view message, const RefusedRequest& request, OwnReply& out);

// Runs server's shape_reply on reply, keeping goro's reply where the hook fails or sets
// what cannot be sent (a status outside 400-599, a framing field, a broken Content-Type).
void shape_reply(const Server::Impl& server, FrameworkReply& reply);

// One request/response exchange as the runner sees it; each engine implements it.
class Exchange : public RequestHost {
 public:
  virtual const Server::Impl& server() const noexcept = 0;
  void shape_reply(FrameworkReply& reply) final;
  // The protocol as the server's log names it: "" for HTTP/1.1, "HTTP/2".
  virtual std::string_view protocol() const noexcept = 0;
  // Answers on the server's own behalf instead of the handler (build_own_reply, framed).
  virtual void refuse(int status, std::string_view message) = 0;
  // The handler returned: the context it got (if it asked) ends.
  virtual void end_request_context() = 0;
  // Adds the request to server_stats().
  virtual void count_request() = 0;

 protected:
  ~Exchange() = default;
};

// How run_exchange left the exchange, for the engine to finish it.
enum class Ran {
  served,     // the handler ran (or OPTIONS *); finish the response
  refused,    // the server answered on its own (Exchange::refuse)
  failed,     // the handler threw before its response began: a 500 is ready to finish,
              // and the connection should not be trusted further
  abandoned,  // the handler threw after its response began: end the stream or connection
};

Ran run_exchange(Server::Impl& server, Exchange& x, Request& req, Response& w);

// "handler for GET /x from 1.2.3.4:5 (HTTP/2) threw: <what>" (no protocol for HTTP/1.1).
std::string handler_threw_message(const Request& req, std::string_view protocol,
                                  const char* what);

}  // namespace goro::http::detail
