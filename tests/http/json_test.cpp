// goro::json: JSON bodies in and out of handlers, through the real server code
// (httptest::record): round trips, the replies decode_or_400 makes for each bad body,
// escaping and UTF-8 both ways, and the nesting limit that keeps a goroutine's stack safe.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <goro/http/errors.hpp>
#include <goro/http/httptest.hpp>
#include <goro/http/json.hpp>
#include <goro/scheduler/runtime.hpp>

namespace goro::http {
namespace {

namespace ht = httptest;
using nlohmann::json;

template <class F>
void on_runtime(int procs, F fn) {
  goro::run(fn, goro::Config{.maxprocs = procs});
}

struct User {
  std::int64_t id = 0;
  std::string name;
  std::string email;
  std::vector<std::string> tags;
};

// Found by argument-dependent lookup, nlohmann's convention.
void to_json(json& j, const User& u) {
  j = json{{"id", u.id}, {"name", u.name}, {"email", u.email}, {"tags", u.tags}};
}
void from_json(const json& j, User& u) {
  j.at("id").get_to(u.id);
  j.at("name").get_to(u.name);
  j.at("email").get_to(u.email);
  u.tags = j.value("tags", std::vector<std::string>{});
}

// Decodes a User, changes it, and answers it back with 201.
void create_user(Request& req, ResponseWriter& w) {
  User u;
  if (!decode_or_400(req, w, u)) return;
  u.id += 1000;
  u.tags.push_back("created");
  write_json(w, u, 201);
}

// The {"error": ...} of a refusal, checked to be JSON.
std::string error_of(const ht::Recorded& r) {
  EXPECT_EQ(r.header("content-type"), "application/json");
  json body = json::parse(r.body, nullptr, false);
  EXPECT_TRUE(body.is_object()) << r.body;
  if (!body.is_object() || !body.contains("error") || !body["error"].is_string()) return {};
  return body["error"].get<std::string>();
}

TEST(JsonErrors, TheCategoryNamesEveryCode) {
  EXPECT_STREQ(json_category().name(), "goro.json");
  for (json_errc e : {json_errc::not_json_content_type, json_errc::empty_body,
                      json_errc::malformed_json, json_errc::too_deep, json_errc::wrong_shape}) {
    std::error_code ec = e;
    EXPECT_EQ(&ec.category(), &json_category());
    EXPECT_FALSE(ec.message().empty());
    EXPECT_EQ(ec.message().find("unknown"), std::string::npos) << ec.message();
  }
}

TEST(JsonWrite, SerialisesCompactlyWithStatusContentTypeAndANewline) {
  on_runtime(1, [] {
    ht::Recorded r = ht::record(
        [](Request&, ResponseWriter& w) { write_json(w, json{{"b", 2}, {"a", {1, true, nullptr}}}, 202); },
        ht::new_request("GET", "/"));
    EXPECT_EQ(r.status, 202);
    EXPECT_EQ(r.header("content-type"), "application/json");
    EXPECT_EQ(r.body, "{\"a\":[1,true,null],\"b\":2}\n");

    // Anything nlohmann::json is made from: a type with to_json, a container.
    ht::Recorded user = ht::record(
        [](Request&, ResponseWriter& w) { write_json(w, User{7, "Ann", "ann@example.com", {}}); },
        ht::new_request("GET", "/"));
    EXPECT_EQ(user.status, 200);
    EXPECT_EQ(user.body, "{\"email\":\"ann@example.com\",\"id\":7,\"name\":\"Ann\",\"tags\":[]}\n");
    ht::Recorded list = ht::record(
        [](Request&, ResponseWriter& w) { write_json(w, std::vector<int>{1, 2, 3}); },
        ht::new_request("GET", "/"));
    EXPECT_EQ(list.body, "[1,2,3]\n");
  });
}

TEST(JsonWrite, KeepsAContentTypeTheHandlerSet) {
  on_runtime(1, [] {
    ht::Recorded r = ht::record(
        [](Request&, ResponseWriter& w) {
          w.header().set("Content-Type", "application/problem+json");
          write_json_error(w, 404, "no such user");
        },
        ht::new_request("GET", "/users/9"));
    EXPECT_EQ(r.status, 404);
    EXPECT_EQ(r.header("content-type"), "application/problem+json");
    EXPECT_EQ(r.body, "{\"error\":\"no such user\"}\n");
  });
}

TEST(JsonWrite, InvalidUtf8InAStringIsWrittenAsReplacementCharacters) {
  on_runtime(1, [] {
    ht::Recorded r = ht::record(
        [](Request&, ResponseWriter& w) {
          EXPECT_FALSE(write_json(w, json{{"s", std::string("a\xC3\x28z\xFF")}}));
        },
        ht::new_request("GET", "/"));
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "{\"s\":\"a\xEF\xBF\xBD(z\xEF\xBF\xBD\"}\n");
    EXPECT_TRUE(json::accept(r.body));
  });
}

TEST(JsonRead, AStructRoundTripsThroughAHandler) {
  on_runtime(1, [] {
    ht::Recorded r = ht::record(
        create_user, ht::new_request("POST", "/users",
                                     R"({"id": 1, "name": "Ann", "email": "ann@example.com",
                                         "tags": ["admin"], "ignored": {"x": [1, 2]}})")
                         .header("Content-Type", "application/json"));
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(r.header("content-type"), "application/json");
    User back = json::parse(r.body).get<User>();
    EXPECT_EQ(back.id, 1001);
    EXPECT_EQ(back.name, "Ann");
    EXPECT_EQ(back.email, "ann@example.com");
    EXPECT_EQ(back.tags, (std::vector<std::string>{"admin", "created"}));

    // Chunked framing is the same body to read_json.
    ht::Recorded chunked = ht::record(
        create_user,
        ht::new_request("POST", "/users", R"({"id":2,"name":"Bo","email":"bo@example.com"})")
            .header("Content-Type", "application/json")
            .chunked(5));
    ASSERT_EQ(chunked.status, 201) << chunked.body;
    EXPECT_EQ(json::parse(chunked.body).at("id"), 1002);
  });
}

TEST(JsonRead, MalformedJsonIs400NamingTheByte) {
  on_runtime(1, [] {
    //                       123456789012345
    std::string body = R"({"name": "Ann",})";
    ht::Recorded r = ht::record(create_user, ht::new_request("POST", "/users", body)
                                                 .header("Content-Type", "application/json"));
    EXPECT_EQ(r.status, 400);
    std::string error = error_of(r);
    EXPECT_EQ(error.rfind("malformed JSON at byte 16: ", 0), 0u) << error;
    EXPECT_NE(error.find("unexpected '}'"), std::string::npos) << error;

    // The same through read_json, with the detail.
    JsonError why;
    std::error_code ec;
    ht::record([&](Request& req, ResponseWriter&) { ec = read_json(req, &why).error(); },
               ht::new_request("POST", "/", body));
    EXPECT_EQ(ec, json_errc::malformed_json);
    EXPECT_EQ(why.code, ec);
    EXPECT_EQ(why.byte, 16u);
    EXPECT_EQ(why.message, error);
  });
}

TEST(JsonRead, ARefusedBodyTakesTheServersShape) {
  on_runtime(1, [] {
    ServerOptions options;
    options.request_ids = true;
    options.shape_reply = [](FrameworkReply& r) {
      r.content_type = "application/problem+json";
      r.body = json{{"title", r.message},
                    {"status", r.status},
                    {"origin", r.origin},
                    {"request_id", r.request_id}}
                   .dump();
    };
    ht::Recorded r = ht::record(
        create_user,
        ht::new_request("POST", "/users", "{").header("Content-Type", "application/json"), options);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.header("content-type"), "application/problem+json");
    const json problem = json::parse(r.body);
    EXPECT_EQ(problem.at("origin"), "json");
    EXPECT_EQ(problem.at("status"), 400);
    EXPECT_EQ(problem.at("title").get<std::string>().rfind("malformed JSON at byte", 0), 0u)
        << r.body;
    EXPECT_EQ(problem.at("request_id"), std::string(r.header("x-request-id")));
  });
}

TEST(JsonRead, AnythingAfterTheValueIsMalformed) {
  on_runtime(1, [] {
    ht::Recorded r = ht::record(create_user, ht::new_request("POST", "/users",
                                                             R"({"id":1,"name":"a","email":"b"} x)"));
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(error_of(r).rfind("malformed JSON at byte 33: ", 0), 0u) << r.body;

    // White space around the value is fine.
    ht::Recorded spaced = ht::record(
        create_user, ht::new_request("POST", "/users", " \r\n{\"id\":1,\"name\":\"a\",\"email\":\"b\"}\n\t "));
    EXPECT_EQ(spaced.status, 201) << spaced.body;
  });
}

TEST(JsonRead, ATextPlainBodyIs415AndIsNotParsed) {
  on_runtime(1, [] {
    ht::Recorded r = ht::record(
        create_user, ht::new_request("POST", "/users", R"({"id":1,"name":"a","email":"b"})")
                         .header("Content-Type", "text/plain; charset=utf-8"));
    EXPECT_EQ(r.status, 415);
    std::string error = error_of(r);
    EXPECT_NE(error.find("text/plain"), std::string::npos) << error;

    for (const char* type : {"application/jsonx", "text/json", "application/", "json",
                             "application/x-www-form-urlencoded"}) {
      EXPECT_EQ(ht::record(create_user, ht::new_request("POST", "/users", "{}")
                                            .header("Content-Type", type))
                    .status,
                415)
          << type;
    }
  });
}

TEST(JsonRead, JsonMediaTypesAndNoContentTypeAreAccepted) {
  on_runtime(1, [] {
    const std::string body = R"({"id":1,"name":"a","email":"b"})";
    for (const char* type : {"application/json", "Application/JSON", "application/json; charset=utf-8",
                             "  application/json ;charset=UTF-8", "application/problem+json",
                             "application/vnd.api+json"}) {
      EXPECT_EQ(ht::record(create_user, ht::new_request("POST", "/users", body)
                                            .header("Content-Type", type))
                    .status,
                201)
          << type;
    }
    EXPECT_EQ(ht::record(create_user, ht::new_request("POST", "/users", body)).status, 201);
  });
}

TEST(JsonRead, ABodyOverMaxBodyBytesIs413) {
  on_runtime(1, [] {
    ServerOptions options;
    options.max_body_bytes = 64;
    std::string big = R"({"id":1,"name":")" + std::string(100, 'x') + R"(","email":"b"})";
    // Announced by Content-Length: the server refuses it before the handler runs.
    ht::Recorded declared = ht::record(
        create_user,
        ht::new_request("POST", "/users", big).header("Content-Type", "application/json"), options);
    EXPECT_EQ(declared.status, 413);

    // Chunked: read_json finds out while reading, and reports errc::body_too_large.
    // The server has answered 413 by itself by then.
    std::error_code ec;
    JsonError why;
    Handler reader = [&](Request& req, ResponseWriter&) { ec = read_json(req, &why).error(); };
    ht::Recorded streamed = ht::record(
        reader, ht::new_request("POST", "/users", big).chunked(16), options);
    EXPECT_EQ(streamed.status, 413);
    EXPECT_EQ(ec, errc::body_too_large);
    EXPECT_EQ(why.code, ec);
    EXPECT_EQ(why.message, "reading the body: body too large");
    EXPECT_EQ(ht::record(create_user, ht::new_request("POST", "/users", big).chunked(16), options)
                  .status,
              413);

    std::string fits = R"({"id":1,"name":"a","email":"b"})";
    EXPECT_EQ(ht::record(create_user, ht::new_request("POST", "/users", fits), options).status, 201);
  });
}

TEST(JsonRead, QuotesControlCharactersAndUtf8SurviveARoundTrip) {
  on_runtime(1, [] {
    const std::string tricky = std::string("say \"hi\" \\ back/slash\n\t\r\b\f\x01\x1f") +
                               std::string(1, '\0') + "\x7f h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x8E\x89";
    User in{5, tricky, "\xC3\xA9mile@example.com", {tricky, ""}};
    const std::string sent = json(in).dump();
    // Control characters are escaped, non-ASCII UTF-8 goes as it is.
    EXPECT_NE(sent.find(R"(\"hi\")"), std::string::npos) << sent;
    EXPECT_NE(sent.find(R"(\u0001\u001f\u0000)"), std::string::npos) << sent;
    EXPECT_NE(sent.find("\xF0\x9F\x8E\x89"), std::string::npos) << sent;

    ht::Recorded r = ht::record(create_user, ht::new_request("POST", "/users", sent)
                                                 .header("Content-Type", "application/json"));
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_NE(r.body.find(R"(say \"hi\" \\ back/slash\n\t\r\b\f\u0001\u001f\u0000)"),
              std::string::npos)
        << r.body;
    User out = json::parse(r.body).get<User>();
    EXPECT_EQ(out.name, tricky);
    EXPECT_EQ(out.email, in.email);
    EXPECT_EQ(out.tags, (std::vector<std::string>{tricky, "", "created"}));

    // \u escapes in the input, surrogate pairs included, decode to UTF-8.
    ht::Recorded escaped = ht::record(
        create_user,
        ht::new_request("POST", "/users",
                        R"({"id":1,"name":"\u00e9\u4e16\ud83c\udf89\"\u0000","email":"e"})"));
    ASSERT_EQ(escaped.status, 201) << escaped.body;
    EXPECT_EQ(json::parse(escaped.body).at("name").get<std::string>(),
              std::string("\xC3\xA9\xE4\xB8\x96\xF0\x9F\x8E\x89\"") + std::string(1, '\0'));
  });
}

TEST(JsonRead, InvalidUtf8IsRefused400) {
  on_runtime(1, [] {
    for (std::string bad : {std::string("\xC3\x28"), std::string("\xFF"), std::string("\xED\xA0\x80"),
                            std::string("\xC0\xAF"), std::string("abc\xE4\xB8")}) {
      std::string body = R"({"id":1,"name":")" + bad + R"(","email":"e"})";
      ht::Recorded r = ht::record(create_user, ht::new_request("POST", "/users", body)
                                                   .header("Content-Type", "application/json"));
      EXPECT_EQ(r.status, 400) << r.body;
      std::string error = error_of(r);  // parses: the quoted bad bytes were replaced
      EXPECT_EQ(error.rfind("malformed JSON at byte ", 0), 0u) << error;
      EXPECT_NE(error.find("UTF-8"), std::string::npos) << error;
    }
    // A lone surrogate escape is no character either.
    ht::Recorded lone = ht::record(
        create_user, ht::new_request("POST", "/users", R"({"id":1,"name":"\ud83c","email":"e"})"));
    EXPECT_EQ(lone.status, 400) << lone.body;
  });
}

TEST(JsonRead, AValueOfTheWrongShapeIs400WithTheReason) {
  on_runtime(1, [] {
    ht::Recorded type = ht::record(create_user,
                                   ht::new_request("POST", "/users", R"({"id":1,"name":5,"email":"e"})"));
    EXPECT_EQ(type.status, 400);
    EXPECT_EQ(error_of(type), "JSON of the wrong shape: type must be string, but is number");

    ht::Recorded missing =
        ht::record(create_user, ht::new_request("POST", "/users", R"({"id":1,"name":"a"})"));
    EXPECT_EQ(missing.status, 400);
    EXPECT_EQ(error_of(missing), "JSON of the wrong shape: key 'email' not found");

    ht::Recorded array = ht::record(create_user, ht::new_request("POST", "/users", "[1,2]"));
    EXPECT_EQ(array.status, 400);

    Result<User> result = User{};
    JsonError why;
    ht::record([&](Request& req, ResponseWriter&) { result = read_json_as<User>(req, &why); },
               ht::new_request("POST", "/", R"({"id":"7","name":"a","email":"e"})"));
    EXPECT_EQ(result.error(), json_errc::wrong_shape);
    EXPECT_EQ(why.code, json_errc::wrong_shape);
    EXPECT_EQ(why.message, "JSON of the wrong shape: type must be number, but is string");
    EXPECT_EQ(why.byte, 0u);
  });
}

TEST(JsonRead, AnEmptyBodyIs400) {
  on_runtime(1, [] {
    for (const char* body : {"", "  \r\n"}) {
      ht::Recorded r = ht::record(create_user, ht::new_request("POST", "/users", body)
                                                   .header("Content-Type", "application/json"));
      EXPECT_EQ(r.status, 400);
      EXPECT_EQ(error_of(r), "request body is empty");
    }
  });
}

TEST(JsonRead, DecodeOr400LeavesOutUnchangedOnFailure) {
  on_runtime(1, [] {
    User kept{9, "kept", "k@example.com", {}};
    bool decoded = true;
    ht::record([&](Request& req, ResponseWriter& w) { decoded = decode_or_400(req, w, kept); },
               ht::new_request("POST", "/", R"({"id":1,"name":"changed"})"));
    EXPECT_FALSE(decoded);
    EXPECT_EQ(kept.id, 9);
    EXPECT_EQ(kept.name, "kept");
  });
}

std::string nested(std::size_t depth) {
  return std::string(depth, '[') + "\"deep\"" + std::string(depth, ']');
}

TEST(JsonRead, NestingPastTheLimitIs400AndAtTheLimitIsSafeToEchoOnAGoroutine) {
  on_runtime(1, [] {
    // The handler copies, compares and writes back what it read, all of which recurse
    // once per level, on a goroutine's default stack.
    Handler echo = [](Request& req, ResponseWriter& w) {
      json value;
      if (!decode_or_400(req, w, value)) return;
      json copy = value;
      EXPECT_EQ(copy, value);
      write_json(w, copy);
    };
    ht::Recorded at_limit = ht::record(echo, ht::new_request("POST", "/", nested(json_max_depth)));
    EXPECT_EQ(at_limit.status, 200);
    EXPECT_EQ(at_limit.body, nested(json_max_depth) + "\n");

    ht::Recorded over = ht::record(echo, ht::new_request("POST", "/", nested(json_max_depth + 1)));
    EXPECT_EQ(over.status, 400);
    EXPECT_EQ(error_of(over), "JSON nested deeper than " + std::to_string(json_max_depth) +
                                  " levels at byte " + std::to_string(json_max_depth + 1));

    // A client's "[[[[..." of a megabyte is refused before any parsing.
    ht::Recorded huge = ht::record(echo, ht::new_request("POST", "/", std::string(1 << 20, '[')));
    EXPECT_EQ(huge.status, 400);

    // Brackets inside strings do not count.
    std::string in_string = "[\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"]";
    ht::Recorded quoted = ht::record(echo, ht::new_request("POST", "/", in_string));
    EXPECT_EQ(quoted.status, 200) << quoted.body;
  });
}

}  // namespace
}  // namespace goro::http
