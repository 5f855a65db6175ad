// The exchange runner and the server's own replies (core/exchange.hpp).
#include "core/exchange.hpp"

#include <exception>

#include <goro/http/middleware.hpp>
#include <goro/http/status.hpp>

#include "access.hpp"

namespace goro::http::detail {

void build_own_reply(const Server::Impl& server, std::string_view remote_addr, int status,
                     std::string_view message, const RefusedRequest& request, OwnReply& out) {
  const ServerOptions& options = server.options;
  out.status = status;
  out.fields.clear();
  out.content_type.assign("text/plain; charset=utf-8");
  out.body = default_error_body(status, message);
  std::string id;
  if (options.request_ids) {
    std::string_view sent;
    for (const HeaderField& f : request.headers) {
      if (iequals(f.name, "x-request-id")) {
        sent = f.value;
        break;
      }
    }
    id = request_id_for(sent);
    out.fields.set("X-Request-Id", id);
  }
  if (options.shape_reply) {
    FrameworkReply shaped;
    shaped.status = out.status;
    shaped.content_type = std::move(out.content_type);
    shaped.body = std::move(out.body);
    shaped.headers = std::move(out.fields);
    shaped.message = message;
    shaped.request_id = id;
    shaped.method = request.method;
    shaped.target = request.target;
    shaped.origin = "server";
    shape_reply(server, shaped);
    out.status = shaped.status;
    out.content_type = std::move(shaped.content_type);
    out.body = std::move(shaped.body);
    out.fields = std::move(shaped.headers);
  }
  const ErrorReplyHook& hook = options.on_error_reply;
  if (!hook) return;
  ErrorReply reply;
  reply.status = out.status;
  reply.message = message;
  reply.remote_addr = remote_addr;
  reply.method = request.method;
  reply.target = request.target;
  reply.request_headers = request.headers;
  reply.request_id = id;
  reply.headers = std::move(out.fields);
  try {
    hook(reply);
  } catch (const std::exception& e) {
    server.log_error(std::string("on_error_reply threw: ") + e.what());
  } catch (...) {
    server.log_error("on_error_reply threw");
  }
  // The hook may add to the reply, not change how it is framed.
  for (const HeaderField& f : reply.headers) {
    if (!framing_field_name(f.name)) out.fields.add(f.name, f.value);
  }
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
  FrameworkReply reply;
  reply.status = status::internal_server_error;
  reply.body = "500 Internal Server Error\n";
  reply.message = "the handler threw an exception";
  reply.origin = "server";
  (void)send_error(req, w, std::move(reply));
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
  if (server.options.request_ids) {
    std::string id = request_id_for(req.header("x-request-id"));
    w.header().set("X-Request-Id", id);
    req.set_context(goro::with_value(req.context(), request_id_key, std::move(id)));
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
