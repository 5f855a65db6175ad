#include "trace.hpp"

#include "sched.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace goro::detail {

std::atomic<bool> trace_enabled{false};

namespace {

struct Event {
  std::int64_t ts;
  std::uint64_t gid;
  std::uint64_t arg;
  std::int32_t m;
  std::int32_t p;
  TraceKind kind;
  char name[32];  // a G's name is at most 31 bytes, cut on a UTF-8 boundary
};

// A ring per M: bounded memory; when full, the oldest events are overwritten.
constexpr std::size_t kRingEvents = 1 << 16;

// mu: the M (or thread) that records, and a reader taking a window (trace_window)
// while it does. Uncontended but for a reader; taken only while tracing is on.
struct Ring {
  std::mutex mu;
  std::vector<Event> events = std::vector<Event>(kRingEvents);
  std::uint64_t next = 0;
};

std::mutex done_mu;  // guards done, path and window_users
std::vector<Ring*> done;  // every ring of this run, registered when made
std::string path;
int window_users = 0;  // trace_window calls in progress

const char* kind_name(TraceKind k) {
  switch (k) {
    case TraceKind::g_create: return "create";
    case TraceKind::g_start: return "start";
    case TraceKind::g_stop: return "stop";
    case TraceKind::g_ready: return "ready";
    case TraceKind::steal: return "steal";
    case TraceKind::syscall_enter: return "syscall enter";
    case TraceKind::syscall_exit: return "syscall exit";
    case TraceKind::handoff: return "handoff";
    case TraceKind::preempt: return "preempt";
    case TraceKind::netpoll: return "netpoll";
    case TraceKind::m_park: return "m park";
  }
  return "?";
}

const char* stop_name(std::uint64_t arg) {
  switch (static_cast<SwitchReason>(arg & 0xff)) {
    case SwitchReason::park: return "park";
    case SwitchReason::yield: return "yield";
    case SwitchReason::preempt: return "preempted";
    case SwitchReason::exit: return "exit";
    case SwitchReason::syscall_no_p: return "syscall exit without P";
  }
  return "?";
}

const char* wait_name(std::uint64_t reason) {
  static const char* names[] = {
      "none",    "chan send", "chan receive", "select",    "select (no cases)",
      "sleep",   "mutex",     "waitgroup",    "cond",      "once",
      "io read", "io write",  "syscall exit", "preempted", "other"};
  return reason < sizeof names / sizeof names[0] ? names[reason] : "?";
}

// Writes a goroutine name inside a JSON string: printable characters only, without
// quotes or backslashes, so no escaping is needed.
void write_json_chars(FILE* f, const char* s) {
  for (const char* c = s; *c; ++c)
    if (static_cast<unsigned char>(*c) >= 0x20 && *c != '"' && *c != '\\') std::fputc(*c, f);
}

}  // namespace

// Threads without an M (sysmon, threads outside the runtime) record into a ring of
// their own, registered at once so the final write finds it.
thread_local Ring* foreign_ring = nullptr;
thread_local unsigned foreign_ring_generation = 0;
std::atomic<unsigned> generation{0};  // one per traced run

void trace_record(TraceKind kind, std::uint64_t gid, std::uint64_t arg, const char* name) {
  M* m = this_m();
  Ring* ring;
  if (m == nullptr) {
    const unsigned gen = generation.load(std::memory_order_relaxed);
    if (foreign_ring == nullptr || foreign_ring_generation != gen) {
      foreign_ring = new Ring();
      foreign_ring_generation = gen;
      std::lock_guard<std::mutex> guard(done_mu);
      done.push_back(foreign_ring);
    }
    ring = foreign_ring;
  } else {
    ring = static_cast<Ring*>(m->trace_buffer);
    if (ring == nullptr) {
      m->trace_buffer = ring = new Ring();
      std::lock_guard<std::mutex> guard(done_mu);
      done.push_back(ring);
    }
  }
  std::lock_guard<std::mutex> hold(ring->mu);
  Event& e = ring->events[ring->next++ % kRingEvents];
  e.ts = nanotime();
  e.gid = gid;
  e.arg = arg;
  e.m = m ? m->id : -1;
  P* pp = m ? (m->p ? m->p : m->oldp) : nullptr;
  e.p = pp ? pp->id : -1;
  e.kind = kind;
  e.name[0] = '\0';
  if (name) {
    std::strncpy(e.name, name, sizeof e.name - 1);
    e.name[sizeof e.name - 1] = '\0';
  }
}

void trace_init() {
  const char* file = std::getenv("GORO_TRACE");
  std::lock_guard<std::mutex> guard(done_mu);
  path = file ? file : "";
  generation.fetch_add(1, std::memory_order_relaxed);
  trace_enabled.store(!path.empty(), std::memory_order_relaxed);
}

void trace_flush_m(M* m) {
  // Its ring is registered already; it stays for the final write.
  m->trace_buffer = nullptr;
}

namespace {

// The events of each ring from `from` on (0: all it still holds), in order.
std::vector<std::vector<Event>> copy_rings(std::int64_t from) {
  std::vector<std::vector<Event>> out;
  for (Ring* ring : done) {
    std::lock_guard<std::mutex> hold(ring->mu);
    std::vector<Event> events;
    const std::uint64_t first = ring->next > kRingEvents ? ring->next - kRingEvents : 0;
    for (std::uint64_t i = first; i < ring->next; ++i) {
      const Event& e = ring->events[i % kRingEvents];
      if (e.ts >= from) events.push_back(e);
    }
    if (!events.empty()) out.push_back(std::move(events));
  }
  return out;
}

// Chrome trace-event JSON (what Perfetto opens), times relative to t0.
void write_trace(FILE* f, const std::vector<std::vector<Event>>& rings, std::int64_t t0) {
  std::fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
  // Metadata: process 1 holds one track per M, process 2 one track per P.
  std::fprintf(f,
               "{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":\"Ms "
               "(threads)\"}},\n");
  std::fprintf(f,
               "{\"ph\":\"M\",\"pid\":2,\"name\":\"process_name\",\"args\":{\"name\":\"Ps "
               "(processors)\"}}");
  for (int i = 0; i < sched.gomaxprocs; ++i)
    std::fprintf(f,
                 ",\n{\"ph\":\"M\",\"pid\":2,\"tid\":%d,\"name\":\"thread_name\",\"args\":{"
                 "\"name\":\"P%d\"}}",
                 i, i);
  for (const std::vector<Event>& ring : rings) {
    bool named = false;
    // A G's run is one complete ("X") slice on its M's track and its P's track, from its
    // start to its stop event.
    const Event* start = nullptr;
    for (const Event& e : ring) {
      if (!named) {
        if (e.m >= 0)
          std::fprintf(f,
                       ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\","
                       "\"args\":{\"name\":\"M%d\"}}",
                       e.m, e.m);
        else
          std::fprintf(f,
                       ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":-1,\"name\":\"thread_name\","
                       "\"args\":{\"name\":\"sysmon\"}}");
        named = true;
      }
      const double us = static_cast<double>(e.ts - t0) / 1000.0;
      const unsigned long long gid = static_cast<unsigned long long>(e.gid);
      if (e.kind == TraceKind::g_start) {
        start = &e;
      } else if (e.kind == TraceKind::g_stop) {
        if (start == nullptr) continue;  // its start was overwritten, or before the window
        const double begin = static_cast<double>(start->ts - t0) / 1000.0;
        for (int track = 1; track <= 2; ++track) {
          int tid = track == 1 ? e.m : start->p;
          if (tid < 0) continue;
          std::fprintf(f,
                       ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                       "\"name\":\"G%llu",
                       track, tid, begin, us - begin, gid);
          if (start->name[0]) {
            std::fputc(' ', f);
            write_json_chars(f, start->name);
          }
          std::fprintf(f, "\",\"args\":{\"stop\":\"%s\",\"wait\":\"%s\"}}", stop_name(e.arg),
                       wait_name(e.arg >> 8));
        }
        start = nullptr;
      } else {
        std::fprintf(f,
                     ",\n{\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"name\":"
                     "\"%s\",\"args\":{\"g\":%llu,\"arg\":%llu,\"p\":%d",
                     e.m, us, kind_name(e.kind), gid, static_cast<unsigned long long>(e.arg),
                     e.p);
        if (e.name[0]) {
          std::fprintf(f, ",\"gname\":\"");
          write_json_chars(f, e.name);
          std::fprintf(f, "\"");
        }
        std::fprintf(f, "}}");
      }
    }
  }
  std::fprintf(f, "\n]}\n");
}

}  // namespace

void trace_shutdown() {
  std::lock_guard<std::mutex> guard(done_mu);
  trace_enabled.store(false, std::memory_order_relaxed);
  if (!path.empty()) {
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      write_trace(f, copy_rings(0), sched.start_time);
      std::fclose(f);
    } else {
      std::fprintf(stderr, "goro: cannot write the trace to %s\n", path.c_str());
    }
  }
  for (Ring* r : done) delete r;
  done.clear();
  window_users = 0;
}

void trace_window_begin() {
  std::lock_guard<std::mutex> guard(done_mu);
  ++window_users;
  trace_enabled.store(true, std::memory_order_relaxed);
}

std::string trace_window_end(std::int64_t from) {
  std::lock_guard<std::mutex> guard(done_mu);
  if (--window_users == 0 && path.empty()) trace_enabled.store(false, std::memory_order_relaxed);
  char* buf = nullptr;
  std::size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (f == nullptr) return {};
  write_trace(f, copy_rings(from), from);
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  return out;
}

}  // namespace goro::detail
