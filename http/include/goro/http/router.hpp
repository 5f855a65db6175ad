// goro::http::Router — request routing by method and path pattern, like Go 1.22's
// ServeMux.
//
//   Router r;
//   r.handle("GET /users/{id}", [](Request& req, ResponseWriter& w) {
//     w.text(std::string(req.path_value("id")));
//   });
//   r.handle("/static/{path...}", files);   // any method
//   r.handle("POST /echo", echo);
//   Server server(options, r);              // a Router is a Handler
//
// Patterns: "[METHOD ]/path". Segments of the path are literals, "{name}" (one
// non-empty segment), "{name...}" (the rest of the path, last only) or "{$}" (the path
// ends here, last only). A pattern ending in "/" matches every path below it, as if it
// ended in an anonymous "{...}". "GET" also matches HEAD. Values are decoded per
// segment, so "%2F" inside a segment does not split it.
//
// When several patterns match, the most specific wins: the path decides first — walking
// the segments, a literal beats "{name}", which beats "{name...}" or a trailing "/" —
// and between equally specific paths a pattern with a method beats one without.
// No pattern matches: 404, except that a path without its trailing slash, which only
// the slashed subtree matches ("/static" when "/static/{path...}" or "/static/" is
// registered), is redirected there with 301, query kept, as Go's ServeMux does.
// Patterns match the path but none the method: 405 with an Allow header.
// Both answers go through ServerOptions::shape_reply (error_reply.hpp), or are replaced
// whole by not_found() and method_not_allowed().
//
// Register every route before serving: handle() is not safe concurrently with serving.
// Serving is safe from many goroutines at once; a Router is a cheap handle (copies share
// the routes).
#pragma once

#include <memory>
#include <string_view>

#include <goro/http/request.hpp>
#include <goro/http/response.hpp>
#include <goro/http/server.hpp>

namespace goro::http {

class Router {
 public:
  Router();

  // Adds a route. Throws std::invalid_argument for a malformed pattern or one already
  // registered.
  Router& handle(std::string_view pattern, Handler handler);
  // Replaces the 404 answer.
  Router& not_found(Handler handler);
  // Replaces the 405 answer; the handler finds the Allow field already set on w.
  Router& method_not_allowed(Handler handler);

  // Dispatches req to the route that matches best (a Router is a Handler).
  void operator()(Request& req, ResponseWriter& w) const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace goro::http
