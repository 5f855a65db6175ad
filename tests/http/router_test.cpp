// Router matching and middleware. Dispatch is tested through httptest::record: the
// request goes over an in-memory connection and the response is read off the wire.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <goro/http/httptest.hpp>
#include <goro/http/middleware.hpp>
#include <goro/http/router.hpp>

#include "test_util.hpp"

namespace goro::http::test {
namespace {

using namespace std::chrono_literals;

struct Dispatched {
  int status = 0;
  std::string body;
  std::string allow;
  std::string location;
  std::string head;  // status line and header fields
};

Dispatched dispatch(const Handler& h, std::string_view method, std::string_view target) {
  const std::string wire =
      httptest::record(h, httptest::new_request(method, target).header("Host", "x")).raw;
  Dispatched r;
  r.status = std::stoi(wire.substr(9, 3));
  std::size_t end = wire.find("\r\n\r\n");
  r.body = wire.substr(end + 4);
  r.head = wire.substr(0, end + 2);
  std::size_t allow = wire.find("Allow: ");
  if (allow != std::string::npos && allow < end) {
    r.allow = wire.substr(allow + 7, wire.find("\r\n", allow) - allow - 7);
  }
  std::size_t location = wire.find("Location: ");
  if (location != std::string::npos && location < end) {
    r.location = wire.substr(location + 10, wire.find("\r\n", location) - location - 10);
  }
  return r;
}

// A handler answering with its name and the path values it was given.
Handler named(std::string name, std::vector<std::string> values = {}) {
  return [name, values](Request& req, ResponseWriter& w) {
    std::string out = name;
    for (const std::string& v : values) out += " " + v + "=" + std::string(req.path_value(v));
    w.text(out);
  };
}

TEST(Router, MostSpecificWins) {
  Router r;
  r.handle("/", named("root"));
  r.handle("GET /users/{id}", named("user", {"id"}));
  r.handle("GET /users/me", named("me"));
  r.handle("/users/{id}/posts/{post}", named("post", {"id", "post"}));
  r.handle("GET /static/{path...}", named("static", {"path"}));
  r.handle("GET /static/special.txt", named("special"));
  r.handle("/exact/{$}", named("exact"));
  r.handle("/tree/", named("tree"));
  r.handle("POST /users/{id}", named("post-user", {"id"}));
  r.handle("/users/{id}/anything", named("any-method"));
  r.handle("GET /users/{id}/anything", named("get-method"));

  EXPECT_EQ(dispatch(r, "GET", "/").body, "root");
  EXPECT_EQ(dispatch(r, "GET", "/nothing/here").body, "root");
  EXPECT_EQ(dispatch(r, "GET", "/users/42").body, "user id=42");
  EXPECT_EQ(dispatch(r, "HEAD", "/users/42").status, 200);
  EXPECT_EQ(dispatch(r, "GET", "/users/me").body, "me");
  EXPECT_EQ(dispatch(r, "POST", "/users/7").body, "post-user id=7");
  EXPECT_EQ(dispatch(r, "DELETE", "/users/7/posts/9").body, "post id=7 post=9");
  EXPECT_EQ(dispatch(r, "GET", "/static/css/site.css").body, "static path=css/site.css");
  EXPECT_EQ(dispatch(r, "GET", "/static/").body, "static path=");
  EXPECT_EQ(dispatch(r, "GET", "/static/special.txt").body, "special");
  EXPECT_EQ(dispatch(r, "GET", "/exact/").body, "exact");
  EXPECT_EQ(dispatch(r, "GET", "/exact/more").body, "root");
  EXPECT_EQ(dispatch(r, "GET", "/tree/a/b/c").body, "tree");
  EXPECT_EQ(dispatch(r, "GET", "/tree/").body, "tree");
  EXPECT_EQ(dispatch(r, "GET", "/users/1/anything").body, "get-method");
  EXPECT_EQ(dispatch(r, "PUT", "/users/1/anything").body, "any-method");
}

// Literal routes are found by their whole path; these are the cases where that shortcut
// could answer differently from trying the routes most specific first.
TEST(Router, LiteralPathsAnswerAsTheFullWalkDoes) {
  Router r;
  r.handle("GET /a/b", named("get-ab"));
  r.handle("POST /{x}/b", named("post-xb", {"x"}));
  r.handle("/a/b", named("any-ab"));
  r.handle("GET /a%2Fb", named("slash-in-one-segment"));
  r.handle("GET /caf%C3%A9", named("cafe"));
  r.handle("HEAD /h", named("head-h"));
  r.handle("GET /h", named("get-h"));
  r.handle("GET /{x}", named("one", {"x"}));

  EXPECT_EQ(dispatch(r, "GET", "/a/b").body, "get-ab");
  EXPECT_EQ(dispatch(r, "HEAD", "/a/b").status, 200);
  EXPECT_EQ(dispatch(r, "DELETE", "/a/b").body, "any-ab");
  // The literal "/a/b" with a method beats "POST /{x}/b" only for GET and HEAD; the
  // literal route without one still beats the wildcard for POST.
  EXPECT_EQ(dispatch(r, "POST", "/a/b").body, "any-ab");
  EXPECT_EQ(dispatch(r, "POST", "/z/b").body, "post-xb x=z");
  // Escapes: the same literal spelled with one, and a "%2F" that is not a separator.
  EXPECT_EQ(dispatch(r, "GET", "/%61/b").body, "get-ab");
  EXPECT_EQ(dispatch(r, "GET", "/a%2Fb").body, "slash-in-one-segment");
  EXPECT_EQ(dispatch(r, "GET", "/caf%C3%A9").body, "cafe");
  // HEAD: its own route first when it was registered first, as in the walk.
  EXPECT_EQ(dispatch(r, "HEAD", "/h").status, 200);
  EXPECT_EQ(dispatch(r, "GET", "/h").body, "get-h");
  EXPECT_EQ(dispatch(r, "GET", "/hh").body, "one x=hh");
  EXPECT_EQ(dispatch(r, "POST", "/h").status, 405);
  EXPECT_EQ(dispatch(r, "POST", "/h").allow, "GET, HEAD");
}

TEST(Router, ValuesAreDecodedPerSegment) {
  Router r;
  r.handle("GET /files/{name}", named("file", {"name"}));
  r.handle("GET /rest/{tail...}", named("rest", {"tail"}));
  EXPECT_EQ(dispatch(r, "GET", "/files/a%2Fb").body, "file name=a/b");
  EXPECT_EQ(dispatch(r, "GET", "/files/a%20b").body, "file name=a b");
  EXPECT_EQ(dispatch(r, "GET", "/rest/x%20y/z").body, "rest tail=x y/z");
  EXPECT_EQ(dispatch(r, "GET", "/files/a/b").status, 404);
}

TEST(Router, PatternWithManyWildcards) {
  Router r;
  r.handle("GET /{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}/{rest...}", named("many", {"a", "i", "rest"}));
  r.handle("GET /{a}/{b}", named("two", {"a", "b"}));
  EXPECT_EQ(dispatch(r, "GET", "/1/2/3/4/5/6/7/8/9/10/11").body, "many a=1 i=9 rest=10/11");
  EXPECT_EQ(dispatch(r, "GET", "/x/y").body, "two a=x b=y");
}

TEST(Router, NotFoundAndMethodNotAllowed) {
  Router r;
  r.handle("GET /thing", named("get"));
  r.handle("PUT /thing", named("put"));
  r.handle("GET /users/{id}", named("user"));
  Dispatched missing = dispatch(r, "GET", "/other");
  EXPECT_EQ(missing.status, 404);
  Dispatched wrong = dispatch(r, "POST", "/thing");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(wrong.allow, "GET, HEAD, PUT");
  EXPECT_EQ(dispatch(r, "GET", "/users/").status, 404) << "{id} needs a non-empty segment";
  EXPECT_EQ(dispatch(r, "GET", "/users/1/").status, 404);
  r.not_found([](Request&, ResponseWriter& w) { w.text("custom", 404); });
  EXPECT_EQ(dispatch(r, "GET", "/nope").body, "custom");
}

// Go's ServeMux: "/static" when only the subtree "/static/..." is registered is sent to
// "/static/" with 301, query and escapes kept; nothing else is redirected.
TEST(Router, SubtreeRootWithoutSlashIsRedirected) {
  Router r;
  r.handle("GET /static/{path...}", named("static", {"path"}));
  r.handle("/docs/", named("docs"));
  r.handle("GET /exact/{$}", named("exact"));
  r.handle("GET /file", named("file"));
  Dispatched s = dispatch(r, "GET", "/static");
  EXPECT_EQ(s.status, 301);
  EXPECT_EQ(s.location, "/static/");
  Dispatched q = dispatch(r, "GET", "/docs?page=2&q=a%20b");
  EXPECT_EQ(q.status, 301);
  EXPECT_EQ(q.location, "/docs/?page=2&q=a%20b");
  EXPECT_EQ(dispatch(r, "GET", "/exact").location, "/exact/");
  EXPECT_EQ(dispatch(r, "GET", "/static/").body, "static path=");
  EXPECT_EQ(dispatch(r, "GET", "/file").status, 200) << "an exact route is not redirected";
  EXPECT_EQ(dispatch(r, "GET", "/file/").status, 404) << "nor is a slash removed";
  EXPECT_EQ(dispatch(r, "POST", "/static").status, 404) << "no route for POST below /static/";
  EXPECT_EQ(dispatch(r, "GET", "/nothing").status, 404);
}

TEST(Router, BadPatterns) {
  Router r;
  EXPECT_THROW(r.handle("users", named("x")), std::invalid_argument);
  EXPECT_THROW(r.handle("GET /a/{id", named("x")), std::invalid_argument);
  EXPECT_THROW(r.handle("GET /a/x{id}", named("x")), std::invalid_argument);
  EXPECT_THROW(r.handle("GET /{rest...}/more", named("x")), std::invalid_argument);
  EXPECT_THROW(r.handle("GET /{a}/{a}", named("x")), std::invalid_argument);
  EXPECT_THROW(r.handle("get /a", named("x")), std::invalid_argument);
  r.handle("GET /a/{id}", named("x"));
  EXPECT_THROW(r.handle("GET /a/{other}", named("y")), std::invalid_argument) << "same shape";
  EXPECT_NO_THROW(r.handle("POST /a/{id}", named("z")));
}

TEST(Middleware, ChainOrderAndAccessLog) {
  std::vector<std::string> order;
  auto tag = [&order](std::string name) -> Middleware {
    return [&order, name](Handler next) -> Handler {
      return [&order, name, next](Request& req, ResponseWriter& w) {
        order.push_back(name);
        next(req, w);
      };
    };
  };
  std::vector<std::string> lines;
  Handler h = chain(named("inner"),
                    {tag("first"), access_log([&](std::string_view l) { lines.emplace_back(l); }),
                     tag("second")});
  Dispatched r = dispatch(h, "GET", "/logged?x=1");
  EXPECT_EQ(r.body, "inner");
  EXPECT_EQ(order, (std::vector<std::string>{"first", "second"}));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"GET /logged?x=1 HTTP/1.1\" 200 5 "), std::string::npos) << lines[0];
}

TEST(Middleware, RecoverAnswers500) {
  std::vector<std::string> lines;
  Handler h = chain(
      [](Request&, ResponseWriter& w) {
        w.header().set("X-Request-Id", "r-17");
        w.header().set("Content-Type", "application/json");
        w.header().set("ETag", "\"v1\"");
        w.write("half");
        throw std::runtime_error("kaput");
      },
      {recover([&](std::string_view l) { lines.emplace_back(l); })});
  Dispatched r = dispatch(h, "GET", "/x");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "500 Internal Server Error\n");
  EXPECT_NE(r.head.find("X-Request-Id: r-17\r\n"), std::string::npos) << r.head;
  EXPECT_NE(r.head.find("Content-Type: text/plain"), std::string::npos) << r.head;
  EXPECT_EQ(r.head.find("application/json"), std::string::npos) << "the abandoned body's type";
  EXPECT_EQ(r.head.find("ETag"), std::string::npos) << r.head;
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("kaput"), std::string::npos);
}

TEST(Middleware, RecoverCatchesWhatIsNotAStdException) {
  std::vector<std::string> lines;
  Handler h = chain([](Request&, ResponseWriter&) { throw 42; },
                    {recover([&](std::string_view l) { lines.emplace_back(l); })});
  Dispatched r = dispatch(h, "GET", "/x");
  EXPECT_EQ(r.status, 500);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("GET /x"), std::string::npos) << lines[0];
}

TEST(Middleware, TimeoutOverTheWire) {
  Router r;
  r.handle("GET /fast", [](Request&, ResponseWriter& w) {
    w.header().set("X-Fast", "1");
    w.set_status(201);
    w.write("quick");
  });
  r.handle("GET /slow", [](Request&, ResponseWriter& w) {
    goro::sleep(600ms);
    w.write("too late");
  });
  r.handle("POST /slow-body", [](Request& req, ResponseWriter& w) {
    Result<std::string> body = req.body();  // the client never sends it
    w.text(body ? "got it" : "read failed");
  });
  TestServer server(chain(r, {timeout(150ms)}));
  auto fast = round_trip(server.port(), "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(fast);
  EXPECT_EQ(fast->status, 201);
  EXPECT_EQ(fast->header("x-fast"), "1");
  EXPECT_EQ(fast->body, "quick");

  RawConn slow(server.port());
  auto start = std::chrono::steady_clock::now();
  slow.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r503 = slow.read_response();
  ASSERT_TRUE(r503);
  EXPECT_EQ(r503->status, 503);
  EXPECT_EQ(r503->header("connection"), "close");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
  EXPECT_TRUE(slow.closed_by_peer());
  EXPECT_EQ(slow.pending().find("too late"), std::string::npos);

  RawConn body(server.port());
  body.send("POST /slow-body HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n");
  auto b = body.read_response();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->status, 503);
  EXPECT_TRUE(body.closed_by_peer());
}

}  // namespace
}  // namespace goro::http::test
