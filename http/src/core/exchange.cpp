// The exchange runner and the server's own replies (core/exchange.hpp).
#include "core/exchange.hpp"

#include <exception>

#include <goro/http/status.hpp>

namespace goro::http::detail {

void build_own_reply(const Server::Impl& server, std::string_view remote_addr, int status,
                     std::string_view message, const RefusedRequest& request, OwnReply& out) {
  out.status = status;
  out.fields.clear();
  out.body.assign(std::to_string(status));
  out.body.push_back(' ');
  out.body.append(reason_phrase(status));
  if (!message.empty()) {
    out.body.append(": ");
    out.body.append(message);
  }
  out.body.push_back('\n');
  const ErrorReplyHook& hook = server.options.on_error_reply;
  if (!hook) return;
  ErrorReply reply;
  reply.status = status;
  reply.message = message;
  reply.remote_addr = remote_addr;
  reply.method = request.method;
  reply.target = request.target;
  reply.request_headers = request.headers;
  try {
    hook(reply);
  } catch (const std::exception& e) {
    server.log_error(std::string("on_error_reply threw: ") + e.what());
  } catch (...) {
    server.log_error("on_error_reply threw");
  }
  // The hook may add to the reply, not change how it is framed.
  reply.headers.remove("content-length");
  reply.headers.remove("transfer-encoding");
  reply.headers.remove("connection");
  out.fields = std::move(reply.headers);
}

std::string handler_threw_message(const Request& req, std::string_view protocol,
                                  const char* what) {
  std::string message = "handler for ";
  message.append(req.method());
  message.push_back(' ');
  message.append(req.target());
  message.append(" from ");
  message.append(req.remote_addr());
  message.append(protocol.empty() ? "" : " (");
  message.append(protocol);
  message.append(protocol.empty() ? "" : ")");
  message.append(" threw: ");
  message.append(what);
  return message;
}

namespace {

Ran handler_failed(Server::Impl& server, Exchange& x, Request& req, Response& w, const char* what) {
  server.log_error(handler_threw_message(req, x.protocol(), what));
  if (w.headers_sent()) {
    w.abandon();
    return Ran::abandoned;
  }
  // The headers a middleware set before the handler failed (a request id, CORS) stay.
  w.discard_response();
  w.text("500 Internal Server Error\n", status::internal_server_error);
  return Ran::failed;
}

}  // namespace

Ran run_exchange(Server::Impl& server, Exchange& x, Request& req, Response& w) {
  x.count_request();
  if (req.target() == "*") {
    // The asterisk form names the server itself; only OPTIONS may use it (RFC 9112
    // 3.2.4). Answered here, as Go's server does, not by the handler: OPTIONS * gets
    // 200 with no body.
    if (req.method() == "OPTIONS") return Ran::served;
    x.refuse(status::bad_request, "asterisk-form request target is only for OPTIONS");
    return Ran::refused;
  }
  Ran ran = Ran::served;
  try {
    server.handler(req, w);
  } catch (const std::exception& e) {
    ran = handler_failed(server, x, req, w, e.what());
  } catch (...) {
    ran = handler_failed(server, x, req, w, "unknown exception");
  }
  x.end_request_context();
  return ran;
}

}  // namespace goro::http::detail
