// http_server: the whole request path of one connection. The input (after its settings
// byte) is everything a client sends; http::Server::serve_conn serves it from an
// in-memory stream to a router, and what the server writes back must be well-formed
// responses, one per request the handler saw and in order (each marked X-Request: n),
// among which the server's own replies: 200 to "OPTIONS *", and at most one error
// reply, which must end the output.
//
// Settings byte: bits 0-1 how the input is split into reads (read_steps); bit 4 tight
// limits (64-byte target, 256 header bytes, 100 body bytes, 16-byte read buffer, 64-byte
// write buffer) instead of moderate ones; bit 5 an on_error_reply hook that reads the
// partial head. An input split into several reads is served again in one read: the
// requests handled and the responses must be the same (apart from Date and 100
// Continue, which depend on timing and on how much of a body had arrived, and from
// which of a limit and a later syntax error is noticed first).
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <goro/http/router.hpp>
#include <goro/http/server.hpp>

#include "harness.hpp"
#include "memory_stream.hpp"
#include "parser_feed.hpp"

namespace goro::fuzz {
namespace {

using http::detail::MessageParser;
using http::detail::ParseStatus;

http::Router make_router() {
  http::Router r;
  r.handle("GET /{$}", [](http::Request&, http::ResponseWriter& w) { w.text("root\n"); });
  r.handle("GET /users/{id}", [](http::Request& req, http::ResponseWriter& w) {
    w.text(std::string(req.path_value("id")));
  });
  r.handle("/static/{path...}", [](http::Request& req, http::ResponseWriter& w) {
    w.text(std::string(req.path_value("path")));
  });
  r.handle("GET /query", [](http::Request& req, http::ResponseWriter& w) {
    w.text(req.query("a").value_or("-"));
  });
  r.handle("POST /echo", [](http::Request& req, http::ResponseWriter& w) {
    Result<std::string> body = req.body();
    if (!body) {
      w.text(body.error().message(), 400);
      return;
    }
    w.header().set("Content-Type", req.header("content-type"));
    w.write(*body);
  });
  // Reads 3 bytes of the body and answers: the server drains the rest or closes.
  r.handle("PUT /partial", [](http::Request& req, http::ResponseWriter& w) {
    char buf[3];
    std::size_t got = 0;
    while (got < sizeof buf) {
      Result<std::size_t> n = req.read(buf + got, sizeof buf - got);
      if (!n) return;  // the server has answered
      if (*n == 0) break;
      got += *n;
    }
    w.text(std::string(buf, got));
  });
  r.handle("GET /stream", [](http::Request&, http::ResponseWriter& w) {
    for (int i = 0; i < 3; ++i) {
      w.write("part " + std::to_string(i) + "\n");
      w.flush();
    }
  });
  r.handle("GET /big", [](http::Request&, http::ResponseWriter& w) {
    for (int i = 0; i < 20; ++i) w.write(std::string(100, static_cast<char>('a' + i)));
  });
  r.handle("/throw", [](http::Request&, http::ResponseWriter&) {
    throw std::runtime_error("handler failure");
  });
  return r;
}

struct Served {
  std::string output;
  std::vector<std::string> methods;  // of each request the handler saw, in order
  // Where the server's own error reply starts in output (npos: none), and its status.
  std::size_t error_reply_at = std::string::npos;
  int error_status = 0;
};

Served serve(std::string_view input, std::uint8_t settings, std::vector<std::size_t> steps) {
  static const http::Router router = make_router();
  http::ServerOptions options;
  options.error_log = [](std::string_view) {};
  if (settings & 0x10) {
    options.max_request_line = 64;
    options.max_header_bytes = 256;
    options.max_body_bytes = 100;
    options.max_drain_bytes = 50;
    options.read_buffer_size = 16;
    options.write_buffer_size = 64;
  } else {
    options.max_request_line = 1024;
    options.max_header_bytes = 4096;
    options.max_body_bytes = 64 * 1024;
    options.max_drain_bytes = 1024;
    options.read_buffer_size = 64;
    options.write_buffer_size = 512;
  }
  if (settings & 0x20) {
    options.on_error_reply = [](http::ErrorReply& reply) {
      reply.headers.set("X-Error-Method", reply.method);
      reply.headers.set("X-Error-Fields", std::to_string(reply.request_headers.size()));
    };
  }
  Served served;
  on_goroutine([&] {
    http::Server server(options, [&served](http::Request& req, http::ResponseWriter& w) {
      w.header().set("X-Request", std::to_string(served.methods.size()));
      served.methods.emplace_back(req.method());
      router(req, w);
    });
    server.serve_conn(std::make_unique<MemoryStream>(input, std::move(steps), served.output));
  });
  return served;
}

bool is_server_error_reply(int status) {
  switch (status) {
    case 400:
    case 408:
    case 413:
    case 414:
    case 417:
    case 431:
    case 501:
    case 505: return true;
    default: return false;
  }
}

bool is_limit(int status) { return status == 413 || status == 414 || status == 431; }

// Parses the response at the start of rest (as a response to HEAD when head: a head
// only) and removes it from rest. Returns the parser, or an error text in failure.
std::unique_ptr<MessageParser> take_response(std::string_view& rest, bool head,
                                             std::string& failure) {
  auto p = std::make_unique<MessageParser>(MessageParser::Mode::response,
                                           http::detail::ParserLimits{1 << 20, 1 << 20, 1 << 20});
  p->set_response_to_head(head);
  ParserFeed feed(*p, rest, read_steps(0));
  ParseStatus st = feed.head();
  if (st == ParseStatus::complete) {
    std::string body;
    st = feed.body(body);
    // A body delimited by the close (an HTTP/1.0 client's streamed response).
    if (st == ParseStatus::need_more) st = p->finish_on_eof();
  }
  if (st != ParseStatus::complete) {
    failure = st == ParseStatus::error ? p->error().message : "cut short";
    return nullptr;
  }
  rest = rest.substr(rest.size() - p->buffered() - feed.rest().size());
  return p;
}

// Checks that output is the responses to the requests the handler saw, in order, each
// marked with its X-Request, among which the server's own replies may come: 200 to
// "OPTIONS *", which goes on, and an error reply, which must be the last bytes.
std::string check_responses(Served& served) {
  const std::string_view output = served.output;
  const std::vector<std::string>& methods = served.methods;
  std::string_view rest = output;
  std::size_t answered = 0;  // responses marked by the handler
  for (std::size_t n = 0; !rest.empty(); ++n) {
    const std::string who = "response " + std::to_string(n) + ": ";
    std::string failure;
    // The head first: whether a body follows depends on whose response it is.
    std::string_view after_head = rest;
    std::unique_ptr<MessageParser> p = take_response(after_head, true, failure);
    if (!p) return who + failure;
    const int status = p->status_code();
    if (status >= 100 && status < 200) {
      if (status != 100) return who + "interim status other than 100";
      rest = after_head;
      continue;
    }
    const std::string_view mark = p->header("x-request");
    if (mark.empty()) {
      if (status == 200 && p->header("content-length") == "0") {  // "OPTIONS *"
        rest = after_head;
        continue;
      }
      if (!is_server_error_reply(status))
        return who + "unexpected status " + std::to_string(status);
      if (!http::iequals(p->header("connection"), "close"))
        return who + "error reply without close";
      // The server's reply to a HEAD request has no body; which it answered is not
      // known here.
      if (!after_head.empty() && std::to_string(after_head.size()) != p->header("content-length"))
        return who + "error reply followed by other bytes";
      if (answered + 1 < methods.size())
        return who + "error reply before a handled request's response";
      served.error_reply_at = output.size() - rest.size();
      served.error_status = status;
      return {};
    }
    if (mark != std::to_string(answered) || answered >= methods.size())
      return who + "X-Request " + std::string(mark) + " out of order";
    if (!take_response(rest, methods[answered] == "HEAD", failure)) return who + failure;
    ++answered;
  }
  if (answered != methods.size()) {
    return std::to_string(methods.size()) + " requests handled, " + std::to_string(answered) +
           " responses";
  }
  return {};
}

// The output with what may differ between two runs of one input taken out: the Date
// values and interim 100 Continue responses.
std::string normalized(std::string_view output) {
  std::string s(output);
  for (std::size_t at = s.find("\r\nDate: "); at != std::string::npos;
       at = s.find("\r\nDate: ", at + 1)) {
    s.replace(at + 8, 29, "-");
  }
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  for (std::size_t at = s.find(kContinue); at != std::string::npos; at = s.find(kContinue, at)) {
    s.erase(at, kContinue.size());
  }
  return s;
}

}  // namespace

std::string http_server(std::string_view input) {
  if (input.empty()) return {};
  const auto settings = static_cast<std::uint8_t>(input[0]);
  input.remove_prefix(1);
  Served split = serve(input, settings, read_steps(settings));
  if (std::string failure = check_responses(split); !failure.empty()) return failure;
  if (settings % 4 == 0) return {};
  Served whole = serve(input, settings, read_steps(0));
  if (std::string failure = check_responses(whole); !failure.empty()) return failure;
  const std::string difference = "other responses when read in one piece:\n--- in pieces:\n" +
                                 split.output + "\n--- in one piece:\n" + whole.output;
  if (whole.methods != split.methods) return difference;
  const std::string_view split_out = split.output, whole_out = whole.output;
  if (normalized(split_out.substr(0, split.error_reply_at)) !=
      normalized(whole_out.substr(0, whole.error_reply_at)))
    return difference;
  // A limit is noticed where the bytes past it arrive, which may be before or after a
  // syntax error further on: then one run answers 413, 414 or 431 and the other 400.
  if (split.error_status == whole.error_status) {
    if (split.error_status != 0 && normalized(split_out.substr(split.error_reply_at)) !=
                                       normalized(whole_out.substr(whole.error_reply_at)))
      return difference;
  } else if (!is_limit(split.error_status) && !is_limit(whole.error_status)) {
    return difference;
  }
  return {};
}

}  // namespace goro::fuzz
