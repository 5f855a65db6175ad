// The event tracer (GORO_TRACE=<file>): a run that exercises goroutine creation,
// channels, sleep, blocking calls, yield, preemption and the netpoller writes a Chrome
// trace-event JSON file that parses, names its M and P tracks, and holds the slices and
// instant events a reader of the trace looks for. Without GORO_TRACE nothing is written.

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/detail/netpoll.hpp>
#include <goro/scheduler/detail/runtime.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "watchdog_util.hpp"

namespace {

using namespace std::chrono_literals;
using goro::detail::nanotime;

#if defined(GORO_TSAN)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif

// ---------------------------------------------------------------------------------
// A small strict JSON parser (RFC 8259, strings must be valid UTF-8).

struct Json {
  using Array = std::vector<Json>;
  using Object = std::map<std::string, Json>;
  std::variant<std::nullptr_t, bool, double, std::string, Array, Object> v;

  const Json* get(const std::string& key) const {
    const auto* o = std::get_if<Object>(&v);
    if (!o) return nullptr;
    auto it = o->find(key);
    return it == o->end() ? nullptr : &it->second;
  }
  std::string str(const std::string& key) const {
    const Json* j = get(key);
    const auto* s = j ? std::get_if<std::string>(&j->v) : nullptr;
    return s ? *s : std::string();
  }
  double num(const std::string& key, double dflt = -1) const {
    const Json* j = get(key);
    const auto* d = j ? std::get_if<double>(&j->v) : nullptr;
    return d ? *d : dflt;
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& text) : s_(text) {}

  // Parses the whole text; on failure returns false with a message naming the offset.
  bool parse(Json* out, std::string* error) {
    try {
      ws();
      *out = value(0);
      ws();
      if (i_ != s_.size()) fail("trailing characters");
      return true;
    } catch (const std::string& e) {
      *error = e;
      return false;
    }
  }

 private:
  [[noreturn]] void fail(const char* what) {
    throw std::string(what) + " at offset " + std::to_string(i_) + " near '" +
        s_.substr(i_ > 20 ? i_ - 20 : 0, 60) + "'";
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail((std::string("expected '") + c + "'").c_str());
  }
  void literal(const char* word) {
    for (const char* p = word; *p; ++p) expect(*p);
  }

  Json value(int depth) {
    if (depth > 64) fail("nesting too deep");
    if (i_ >= s_.size()) fail("unexpected end");
    Json j;
    switch (s_[i_]) {
      case '{': {
        ++i_;
        Json::Object o;
        ws();
        if (!eat('}')) {
          do {
            ws();
            std::string k = string();
            ws();
            expect(':');
            ws();
            if (o.count(k)) fail("duplicate key");
            o[k] = value(depth + 1);
            ws();
          } while (eat(','));
          expect('}');
        }
        j.v = std::move(o);
        return j;
      }
      case '[': {
        ++i_;
        Json::Array a;
        ws();
        if (!eat(']')) {
          do {
            ws();
            a.push_back(value(depth + 1));
            ws();
          } while (eat(','));
          expect(']');
        }
        j.v = std::move(a);
        return j;
      }
      case '"': j.v = string(); return j;
      case 't':
        literal("true");
        j.v = true;
        return j;
      case 'f':
        literal("false");
        j.v = false;
        return j;
      case 'n':
        literal("null");
        j.v = nullptr;
        return j;
      default: j.v = number(); return j;
    }
  }

  double number() {
    const std::size_t start = i_;
    eat('-');
    if (eat('0')) {
    } else if (i_ < s_.size() && s_[i_] >= '1' && s_[i_] <= '9') {
      while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    } else {
      fail("bad number");
    }
    if (eat('.')) {
      if (i_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[i_]))) fail("bad fraction");
      while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    if (eat('e') || eat('E')) {
      if (!eat('+')) eat('-');
      if (i_ >= s_.size() || !isdigit(static_cast<unsigned char>(s_[i_]))) fail("bad exponent");
      while (i_ < s_.size() && isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    return std::stod(s_.substr(start, i_ - start));
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        ++i_;
        return out;
      }
      if (c < 0x20) fail("control character in string");
      if (c == '\\') {
        ++i_;
        if (i_ >= s_.size()) fail("unterminated escape");
        const char e = s_[i_++];
        switch (e) {
          case '"':
          case '\\':
          case '/': out += e; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u':
            for (int k = 0; k < 4; ++k)
              if (i_ >= s_.size() || !isxdigit(static_cast<unsigned char>(s_[i_++])))
                fail("bad \\u escape");
            out += '?';
            break;
          default: fail("bad escape");
        }
        continue;
      }
      // One UTF-8 sequence: JSON text must be valid Unicode.
      int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
      if (len == 0 || (len == 2 && c < 0xC2)) fail("invalid UTF-8 lead byte");
      if (i_ + len > s_.size()) fail("truncated UTF-8 sequence");
      for (int k = 1; k < len; ++k)
        if ((static_cast<unsigned char>(s_[i_ + k]) & 0xC0) != 0x80)
          fail("truncated UTF-8 sequence");
      out.append(s_, i_, len);
      i_ += len;
    }
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

// ---------------------------------------------------------------------------------

std::string temp_path(const char* tag) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/goro_trace_test_" + tag + "_" +
         std::to_string(getpid()) + ".json";
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool file_exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

void os_sleep(std::int64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Runs fn as goro's main goroutine with GORO_TRACE=path, then unsets it.
void traced_run(const std::string& path, std::function<void()> fn, int procs) {
  std::remove(path.c_str());
  ASSERT_EQ(setenv("GORO_TRACE", path.c_str(), 1), 0);
  goro::run(std::move(fn), goro::Config{.maxprocs = procs});
  unsetenv("GORO_TRACE");
}

// Everything the scenario below does, in one traced run on 1 P.
void scenario(bool* netpoll_woke) {
  // go + channel ping-pong: create, ready, park on "chan receive" / "chan send".
  goro::Chan<int> ping, pong;
  goro::go(goro::GoOptions{.name = "ponger"}, [&] {
    for (int i = 0; i < 50; ++i) pong.send(*ping.recv() + 1);
  });
  for (int i = 0; i < 50; ++i) {
    ping.send(i);
    EXPECT_EQ(*pong.recv(), i + 1);
  }
  // sleep, yield, a short blocking call, and blocking_long (hands the P off at once).
  goro::sleep(2ms);
  goro::yield();
  EXPECT_EQ(goro::blocking([] { return 5; }), 5);
  {
    goro::WaitGroup wg;
    wg.add(1);
    goro::go([&] {  // runnable while main is in blocking_long
      goro::yield();
      wg.done();
    });
    goro::blocking_long([] { os_sleep(5'000'000); });
    wg.wait();
  }
  // A 40 ms hog with a second goroutine runnable on the same P: sysmon preempts it.
  if (!kTsan) {
    goro::WaitGroup wg;
    wg.add(2);
    std::atomic<std::int64_t> other_ran{0}, hog_end{0};
    goro::go([&] {  // queued behind the hog (go() puts the newest in runnext)
      other_ran.store(nanotime());
      wg.done();
    });
    goro::go([&] {
      // At least 40 ms; then on until the other goroutine has run (a loaded machine
      // can delay the preemption signal's handler), at most 2 s.
      const std::int64_t start = nanotime();
      volatile std::uint64_t n = 0;
      for (;;) {
        const std::int64_t now = nanotime();
        if (now >= start + 2'000'000'000) break;
        if (now >= start + 40'000'000 && other_ran.load(std::memory_order_relaxed) != 0) break;
        n = n + 1;
      }
      hog_end.store(nanotime());
      wg.done();
    });
    wg.wait();
    EXPECT_NE(other_ran.load(), 0);
    EXPECT_LT(other_ran.load(), hog_end.load()) << "the hog was not preempted within 2 s";
  }
  // A pipe read through the netpoller: one goroutine parks in poll_wait(read), another
  // writes after 5 ms.
  {
    int fds[2];
    ASSERT_EQ(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    goro::detail::PollDesc* pd = goro::detail::poll_open(fds[0]);
    ASSERT_NE(pd, nullptr);
    goro::WaitGroup wg;
    wg.add(2);
    goro::go([&] {
      *netpoll_woke = goro::detail::poll_wait(pd, goro::detail::IoMode::read) ==
                      goro::detail::PollStatus::ready;
      wg.done();
    });
    goro::go([&] {
      goro::sleep(5ms);
      EXPECT_EQ(write(fds[1], "x", 1), 1);
      wg.done();
    });
    wg.wait();
    goro::detail::poll_evict(pd);
    goro::detail::poll_close(pd);
    close(fds[0]);
    close(fds[1]);
  }
}

TEST(Trace, WritesValidChromeTraceWithEveryEventKind) {
  const std::string path = temp_path("full");
  bool netpoll_woke = false;
  traced_run(
      path, [&] { scenario(&netpoll_woke); }, 1);
  EXPECT_TRUE(netpoll_woke);
  ASSERT_TRUE(file_exists(path)) << "no trace written to " << path;
  const std::string text = read_file(path);
  Json doc;
  std::string error;
  ASSERT_TRUE(JsonParser(text).parse(&doc, &error)) << "the trace is not valid JSON: " << error;
  const Json* events_j = doc.get("traceEvents");
  ASSERT_NE(events_j, nullptr);
  const auto* events = std::get_if<Json::Array>(&events_j->v);
  ASSERT_NE(events, nullptr) << "traceEvents is not an array";

  std::set<std::string> m_tracks, p_tracks, instants;
  std::set<int> slice_pids;
  bool chan_park = false, preempted_stop = false;
  int slices = 0;
  for (const Json& e : *events) {
    const std::string ph = e.str("ph");
    ASSERT_FALSE(ph.empty()) << "an event without ph";
    if (ph == "M" && e.str("name") == "thread_name") {
      const Json* args = e.get("args");
      ASSERT_NE(args, nullptr);
      (e.num("pid") == 1 ? m_tracks : p_tracks).insert(args->str("name"));
    } else if (ph == "X") {
      const std::string name = e.str("name");
      EXPECT_TRUE(name.size() > 1 && name[0] == 'G') << name;
      EXPECT_GE(e.num("dur"), 0.0);
      EXPECT_GE(e.num("ts"), 0.0);
      slice_pids.insert(static_cast<int>(e.num("pid")));
      slices++;
      if (const Json* args = e.get("args")) {
        if (args->str("stop") == "park" &&
            (args->str("wait") == "chan receive" || args->str("wait") == "chan send"))
          chan_park = true;
        if (args->str("stop") == "preempted") preempted_stop = true;
      }
    } else if (ph == "i") {
      instants.insert(e.str("name"));
    }
  }
  std::string kinds;
  for (const std::string& k : instants) kinds += "'" + k + "' ";
  std::printf("[figure] trace: %zu events, %d slices, M tracks %zu, P tracks %zu, instants: %s\n",
              events->size(), slices, m_tracks.size(), p_tracks.size(), kinds.c_str());

  EXPECT_TRUE(m_tracks.count("M0")) << "no thread name for M0";
  int m_named = 0;
  for (const std::string& t : m_tracks) m_named += t.size() > 1 && t[0] == 'M';
  EXPECT_GE(m_named, 2) << "blocking_long should have started a second M";
  EXPECT_TRUE(p_tracks.count("P0")) << "no thread name for P0";
  EXPECT_TRUE(slice_pids.count(1)) << "no goroutine slices on the M tracks";
  EXPECT_TRUE(slice_pids.count(2)) << "no goroutine slices on the P tracks";
  EXPECT_TRUE(chan_park) << "no slice ending in a park on a channel";
  for (const char* kind :
       {"create", "ready", "syscall enter", "syscall exit", "handoff", "netpoll"})
    EXPECT_TRUE(instants.count(kind)) << "no '" << kind << "' event; seen: " << kinds;
  if (!kTsan) {
    EXPECT_TRUE(instants.count("preempt")) << "no 'preempt' event; seen: " << kinds;
    EXPECT_TRUE(preempted_stop) << "the preempted hog's slice does not end in 'preempted'";
  }
  std::remove(path.c_str());
}

// Goroutine names are user text: quotes, backslashes, control characters and
// multi-byte UTF-8 cut by the name limits must still give a valid JSON file, and a
// short non-ASCII name comes out as it went in ("gname" of its create event).
TEST(Trace, GoroutineNamesKeepTheFileValid) {
  const std::string path = temp_path("names");
  const std::vector<std::string> exact = {
      "caf\xC3\xA9",                      // café
      "\xE5\x90\x8D\xE5\x89\x8D worker",  // 名前 worker
  };
  const std::vector<std::string> long_names = {
      "q\"uote\\back",  // may be shown without them
      "tab\tnl\nend",
      // 'a' then 2-byte characters: every cut at an odd byte count splits one.
      "a\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"
      "\xC3\xA9"
      "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9",
      // 3-byte characters (CJK), cut somewhere inside one as well.
      "\xE5\x90\x8D\xE5\x89\x8D\xE5\x90\x8D\xE5\x89\x8D\xE5\x90\x8D\xE5\x89\x8D\xE5\x90\x8D\xE5\x89"
      "\x8D"
      "\xE5\x90\x8D\xE5\x89\x8D\xE5\x90\x8D",
      "bb\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F\x98\x80\xF0\x9F"
      "\x98\x80"
      "\xF0\x9F\x98\x80\xF0\x9F\x98\x80",
  };
  traced_run(
      path,
      [&] {
        goro::WaitGroup wg;
        wg.add(static_cast<int>(exact.size() + long_names.size()));
        for (const auto* list : {&exact, &long_names})
          for (const std::string& n : *list)
            goro::go(goro::GoOptions{.name = n}, [&] { wg.done(); });
        wg.wait();
      },
      1);
  ASSERT_TRUE(file_exists(path));
  const std::string text = read_file(path);
  Json doc;
  std::string error;
  ASSERT_TRUE(JsonParser(text).parse(&doc, &error)) << "the trace is not valid JSON: " << error;
  std::set<std::string> gnames;
  if (const Json* ev = doc.get("traceEvents"))
    if (const auto* arr = std::get_if<Json::Array>(&ev->v))
      for (const Json& e : *arr)
        if (e.str("name") == "create")
          if (const Json* args = e.get("args")) gnames.insert(args->str("gname"));
  for (const std::string& n : exact)
    EXPECT_TRUE(gnames.count(n)) << "goroutine name '" << n << "' was mangled";
  std::remove(path.c_str());
}

// Without GORO_TRACE (or with it empty) nothing is written, not even to the current
// directory.
TEST(Trace, NoFileWithoutGoroTrace) {
  char dir_template[] = "/tmp/goro_trace_off_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  char old_cwd[4096];
  ASSERT_NE(getcwd(old_cwd, sizeof old_cwd), nullptr);
  ASSERT_EQ(chdir(dir.c_str()), 0);
  auto body = [] {
    goro::Chan<int> c;
    goro::go([&] { c.send(1); });
    EXPECT_EQ(*c.recv(), 1);
    goro::sleep(1ms);
    goro::blocking_long([] {});
  };
  unsetenv("GORO_TRACE");
  goro::run(body, goro::Config{.maxprocs = 1});
  ASSERT_EQ(setenv("GORO_TRACE", "", 1), 0);
  goro::run(body, goro::Config{.maxprocs = 1});
  unsetenv("GORO_TRACE");
  ASSERT_EQ(chdir(old_cwd), 0);
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* ent = readdir(d))
      if (std::string(ent->d_name) != "." && std::string(ent->d_name) != "..")
        files.push_back(ent->d_name);
    closedir(d);
  }
  for (const std::string& f : files) std::remove((dir + "/" + f).c_str());
  rmdir(dir.c_str());
  EXPECT_TRUE(files.empty()) << "a file was written: " << (files.empty() ? "" : files[0]);
}

// A traced run followed by an untraced one: the second leaves the first's file alone.
TEST(Trace, TracingIsPerRun) {
  const std::string path = temp_path("perrun");
  traced_run(
      path, [] { goro::sleep(1ms); }, 1);
  ASSERT_TRUE(file_exists(path));
  const std::string first = read_file(path);
  goro::run([] { goro::sleep(1ms); }, goro::Config{.maxprocs = 1});
  EXPECT_EQ(read_file(path), first);
  std::remove(path.c_str());
}

}  // namespace
