// The replies goro makes by itself, shaped by ServerOptions::shape_reply
// (error_reply.hpp), and the request ids the server and request_id() give.
#include <goro/http/error_reply.hpp>

#include <cstdio>
#include <exception>
#include <random>

#include <goro/http/middleware.hpp>
#include <goro/http/status.hpp>
#include <goro/scheduler/thread_local.hpp>

#include "access.hpp"
#include "core/exchange.hpp"

namespace goro::http {

namespace detail {

namespace {

bool header_safe(std::string_view s) { return s.find_first_of("\r\n") == std::string_view::npos; }

// A per-thread splitmix64 generator, seeded from the OS.
constinit goro::ThreadLocal request_id_state = [] {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ 0x9e3779b97f4a7c15ull;
};

}  // namespace

bool framing_field_name(std::string_view name) {
  return iequals(name, "content-length") || iequals(name, "transfer-encoding") ||
         iequals(name, "connection");
}

std::string default_error_body(int status, std::string_view message) {
  std::string body = std::to_string(status);
  body.push_back(' ');
  body.append(reason_phrase(status));
  if (!message.empty()) {
    body.append(": ");
    body.append(message);
  }
  body.push_back('\n');
  return body;
}

void shape_reply(const Server::Impl& server, FrameworkReply& reply) {
  const ReplyShaper& hook = server.options.shape_reply;
  if (!hook) return;
  FrameworkReply shaped = reply;
  try {
    hook(shaped);
  } catch (const std::exception& e) {
    server.log_error(std::string("shape_reply threw: ") + e.what());
    return;
  } catch (...) {
    server.log_error("shape_reply threw");
    return;
  }
  if (shaped.status >= 400 && shaped.status <= 599) reply.status = shaped.status;
  if (header_safe(shaped.content_type)) reply.content_type = std::move(shaped.content_type);
  reply.body = std::move(shaped.body);
  // The reply's framing stays the server's.
  Headers fields;
  for (const HeaderField& f : shaped.headers) {
    if (!framing_field_name(f.name)) fields.add(f.name, f.value);
  }
  reply.headers = std::move(fields);
}

bool acceptable_request_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      return false;
  }
  return true;
}

std::string new_request_id() {
  std::uint64_t z = (*request_id_state.use() += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(z));
  return std::string(buf, 16);
}

std::string request_id_for(std::string_view sent) {
  return acceptable_request_id(sent) ? std::string(sent) : new_request_id();
}

std::error_code send_builtin_error(Request& req, ResponseWriter& w, int status, std::string body,
                                   std::string_view message, std::string_view origin) {
  FrameworkReply reply;
  reply.status = status;
  reply.body = std::move(body);
  reply.message = message;
  reply.origin = origin;
  return send_error(req, w, std::move(reply));
}

void Exchange::shape_reply(FrameworkReply& reply) { detail::shape_reply(server(), reply); }

}  // namespace detail

const goro::ContextKey<std::string> request_id_key{"goro.http.request-id"};

std::string_view request_id_of(Request& req) {
  // An id is put on the context by set_context, so a request whose context was never
  // made has none: no need to make one (an error reply, a shed request, stays cheap).
  if (!detail::RequestAccess::context_made(req)) return {};
  const std::string* id = req.context().value(request_id_key);
  return id != nullptr ? std::string_view(*id) : std::string_view();
}

std::error_code send_error(Request& req, ResponseWriter& w, FrameworkReply reply) {
  std::string_view id = request_id_of(req);
  if (id.empty()) id = w.header().get("x-request-id");
  reply.request_id = id;
  reply.method = req.method();
  reply.target = req.target();
  if (detail::RequestHost* host = detail::RequestAccess::host(req)) host->shape_reply(reply);
  Headers& h = w.header();
  // The body is the error's now, whatever the handler had announced for its own.
  h.remove("content-length");
  h.remove("content-encoding");
  h.set("Content-Type", reply.content_type);
  for (const HeaderField& f : reply.headers) {
    if (!detail::framing_field_name(f.name)) h.set(f.name, f.value);
  }
  w.set_status(reply.status);
  return w.write(reply.body);
}

std::error_code send_error(Request& req, ResponseWriter& w, int status, std::string_view message) {
  FrameworkReply reply;
  reply.status = status;
  reply.body = detail::default_error_body(status, message);
  reply.message = message;
  reply.origin = "handler";
  return send_error(req, w, std::move(reply));
}

}  // namespace goro::http
