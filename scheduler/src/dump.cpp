// Goroutine dumps (debug.hpp): a snapshot of every live G, the stacks of the parked ones
// read with libunwind from the registers goro_switch saved, and the SIGQUIT dump.
//
// Reading a parked G's stack: the dump moves it from waiting to scanning by CAS, so the
// registers it saved and the frames above them stay as they are while libunwind walks
// them; every path that makes a G runnable goes through leave_waiting, which waits while
// the mark is there. A G in any other state is reported without its stack.

#include <goro/scheduler/debug.hpp>

#include <cxxabi.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>

#include <goro/scheduler/detail/introspect.hpp>
#include <goro/scheduler/runtime.hpp>

#include "goroutine.hpp"
#include "sched.hpp"
#include "sysmon.hpp"
#include "trace.hpp"

#if defined(GORO_HAVE_LIBUNWIND) && defined(__x86_64__)
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <ucontext.h>
#define GORO_DUMP_STACKS 1
#endif

namespace goro::detail {
namespace {

const char* wait_reason_text(WaitReason r) {
  switch (r) {
    case WaitReason::chan_send: return "chan send";
    case WaitReason::chan_recv: return "chan receive";
    case WaitReason::select: return "select";
    case WaitReason::select_no_cases: return "select (no cases)";
    case WaitReason::sleep: return "sleep";
    case WaitReason::mutex: return "sync.Mutex.Lock";
    case WaitReason::waitgroup: return "sync.WaitGroup.Wait";
    case WaitReason::cond: return "sync.Cond.Wait";
    case WaitReason::once: return "sync.Once";
    case WaitReason::io_read: return "IO wait read";
    case WaitReason::io_write: return "IO wait write";
    case WaitReason::syscall_exit: return "syscall exit";
    case WaitReason::preempted: return "preempted";
    case WaitReason::none:
    case WaitReason::other: break;
  }
  return "waiting";
}

std::string demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return name;
  std::string s(out);
  std::free(out);
  return s;
}

#if GORO_DUMP_STACKS
// libunwind is loaded when the first dump needs it, with RTLD_LOCAL, never linked: a
// linked libunwind.so would also provide the _Unwind_* entry points and take over C++
// exception unwinding for the whole program. Without libunwind.so.8 installed, dumps
// still list every goroutine, without stacks.
struct Unwinder {
  int (*init_local)(unw_cursor_t*, unw_context_t*) = nullptr;
  int (*step)(unw_cursor_t*) = nullptr;
  int (*get_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t*) = nullptr;
  int (*get_proc_name)(unw_cursor_t*, char*, std::size_t, unw_word_t*) = nullptr;
  bool ok = false;
};

const Unwinder& unwinder() {
  static const Unwinder u = [] {
    Unwinder w;
    void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) h = dlopen("libunwind.so", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return w;
    w.init_local = reinterpret_cast<decltype(w.init_local)>(dlsym(h, "_ULx86_64_init_local"));
    w.step = reinterpret_cast<decltype(w.step)>(dlsym(h, "_ULx86_64_step"));
    w.get_reg = reinterpret_cast<decltype(w.get_reg)>(dlsym(h, "_ULx86_64_get_reg"));
    w.get_proc_name =
        reinterpret_cast<decltype(w.get_proc_name)>(dlsym(h, "_ULx86_64_get_proc_name"));
    w.ok = w.init_local && w.step && w.get_reg && w.get_proc_name;
    return w;
  }();
  return u;
}

// One walk at a time: libunwind keeps process-wide state of its own.
std::mutex unwind_mu;

// Symbol names by address, shared by every dump (the symbol table lookup reads the ELF
// file; a server's thousands of goroutines share a few dozen frames).
std::mutex symbol_mu;
std::unordered_map<std::uintptr_t, std::string> symbol_cache;

std::string symbolize(unw_cursor_t* cursor, std::uintptr_t pc) {
  {
    std::lock_guard lock(symbol_mu);
    if (auto it = symbol_cache.find(pc); it != symbol_cache.end()) return it->second;
  }
  char name[512];
  unw_word_t offset = 0;
  std::string text;
  if (unwinder().get_proc_name(cursor, name, sizeof name, &offset) == 0) {
    char off[32];
    std::snprintf(off, sizeof off, "+0x%lx", static_cast<unsigned long>(offset));
    text = demangle(name) + off;
  } else {
    char addr[32];
    std::snprintf(addr, sizeof addr, "0x%lx", static_cast<unsigned long>(pc));
    text = addr;
  }
  std::lock_guard lock(symbol_mu);
  symbol_cache.emplace(pc, text);
  return text;
}

// A context whose registers are those goro_switch saved at sp (switch_x86_64.S): below
// the return address, rbp, rbx, r12-r15, then the MXCSR / x87 control word slot.
void context_from_saved(unw_context_t* ctx, void* sp) {
  getcontext(ctx);  // unw_context_t is ucontext_t on x86-64
  auto* words = static_cast<std::uintptr_t*>(sp);
  greg_t* r = ctx->uc_mcontext.gregs;
  r[REG_R15] = static_cast<greg_t>(words[1]);
  r[REG_R14] = static_cast<greg_t>(words[2]);
  r[REG_R13] = static_cast<greg_t>(words[3]);
  r[REG_R12] = static_cast<greg_t>(words[4]);
  r[REG_RBX] = static_cast<greg_t>(words[5]);
  r[REG_RBP] = static_cast<greg_t>(words[6]);
  r[REG_RIP] = static_cast<greg_t>(words[7]);
  r[REG_RSP] = static_cast<greg_t>(reinterpret_cast<std::uintptr_t>(words + 8));
}

void read_stack(G* g, debug::Goroutine& out) {
  const Unwinder& u = unwinder();
  if (!u.ok) {
    out.stack_note = "stack not read: libunwind.so.8 could not be loaded";
    return;
  }
  std::lock_guard lock(unwind_mu);
  unw_context_t ctx;
  context_from_saved(&ctx, g->sp);
  unw_cursor_t cursor;
  if (u.init_local(&cursor, &ctx) != 0) {
    out.stack_note = "stack could not be read";
    return;
  }
  for (int depth = 0; depth < 64; ++depth) {
    unw_word_t ip = 0;
    if (u.get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
    // A return address points after its call: look its symbol up one byte back.
    const std::uintptr_t pc = depth == 0 ? ip : ip - 1;
    std::string frame = symbolize(&cursor, pc);
    // The switch itself is the same for every parked goroutine, but reached by two
    // paths (straight to the next goroutine, or through the scheduler): leave it out,
    // so that goroutines parked at the same place have the same stack.
    const bool switching = out.frames.empty() && (frame.rfind("goro::detail::switch_", 0) == 0 ||
                                                  frame.rfind("goro::detail::park(", 0) == 0 ||
                                                  frame.rfind("goro_switch", 0) == 0);
    if (!switching) {
      out.pcs.push_back(pc);
      out.frames.push_back(std::move(frame));
    }
    if (u.step(&cursor) <= 0) break;
  }
}

std::string symbolize_pc(void* pc) {
  const Unwinder& u = unwinder();
  if (pc == nullptr || !u.ok) return {};
  std::lock_guard lock(unwind_mu);
  unw_context_t ctx;
  getcontext(&ctx);
  ctx.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(reinterpret_cast<std::uintptr_t>(pc) - 1);
  unw_cursor_t cursor;
  if (u.init_local(&cursor, &ctx) != 0) return {};
  std::string s = symbolize(&cursor, reinterpret_cast<std::uintptr_t>(pc) - 1);
  const std::size_t plus = s.rfind("+0x");
  return plus == std::string::npos ? s : s.substr(0, plus);
}
#else
void read_stack(G*, debug::Goroutine& out) {
  out.stack_note = "stack not read (this build has no libunwind for this architecture)";
}
std::string symbolize_pc(void*) { return {}; }
#endif

struct Collect {
  std::vector<debug::Goroutine> list;
  std::int64_t now = 0;
};

void collect_one(G* g, void* arg) {
  auto* c = static_cast<Collect*>(arg);
  GStatus st = g->status.load(std::memory_order_acquire);
  if (st == GStatus::dead) return;
  debug::Goroutine out;
  if (st == GStatus::waiting) {
    GStatus expected = GStatus::waiting;
    if (g->status.compare_exchange_strong(expected, GStatus::scanning, std::memory_order_acq_rel)) {
      out.state = wait_reason_text(g->wait_reason);
      if (g->wait_reason == WaitReason::io_read || g->wait_reason == WaitReason::io_write)
        out.state += " fd " + std::to_string(g->wait_fd);
      out.waiting_ns = std::max<std::int64_t>(0, c->now - g->wait_since);
      read_stack(g, out);
      g->status.store(GStatus::waiting, std::memory_order_release);
    } else {
      st = expected;  // it moved on meanwhile
    }
  }
  if (out.state.empty()) {
    if (st == GStatus::dead) return;
    switch (st) {
      case GStatus::running: out.state = "running"; break;
      case GStatus::syscall: out.state = "syscall (goro::blocking)"; break;
      case GStatus::runnable: out.state = "runnable"; break;
      default: out.state = "waiting"; break;
    }
    out.stack_note = "stack not read: the goroutine is " + out.state +
                     " (only a parked goroutine's stack can be read without stopping it)";
  }
  out.id = g->id.load(std::memory_order_relaxed);
  out.name = g->name;
  out.parent_id = g->parent_id;
  out.created_by = symbolize_pc(g->creator_pc);
  c->list.push_back(std::move(out));
}

std::string waited(std::int64_t ns) {
  if (ns < 1'000'000'000) return {};
  const std::int64_t s = ns / 1'000'000'000;
  if (s < 60) return ", " + std::to_string(s) + " s";
  return ", " + std::to_string(s / 60) + (s < 120 ? " minute" : " minutes");
}

void append_json_string(std::string& out, std::string_view v) {
  out.push_back('"');
  for (unsigned char ch : v) {
    if (ch == '"' || ch == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(ch));
    } else if (ch < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", ch);
      out.append(esc);
    } else {
      out.push_back(static_cast<char>(ch));
    }
  }
  out.push_back('"');
}

// SIGQUIT: the handler only writes to a pipe; a thread of its own prints the dump (it
// needs locks and memory, and must work even when every P is stuck) and exits. The
// thread lives as long as the goro::run (none is left behind at the process's exit);
// a 0 on the pipe tells it to end.
int quit_pipe[2] = {-1, -1};
std::once_flag quit_once;
std::thread quit_watcher;  // while this run handles SIGQUIT

void on_sigquit(int) {
  const int saved = errno;
  const char b = 1;
  if (write(quit_pipe[1], &b, 1) < 0) {
  }
  errno = saved;
}

void quit_thread() {
  char b = 0;
  while (read(quit_pipe[0], &b, 1) < 0 && errno == EINTR) {
  }
  if (b == 0) return;  // the run is over
  std::fputs("SIGQUIT: quit\n\n", stderr);
  if (sched.running.load(std::memory_order_acquire)) debug::dump(stderr);
  std::fflush(stderr);
  _exit(2);
}

}  // namespace

void install_sigquit_dump() {
  std::call_once(quit_once, [] {
    if (pipe2(quit_pipe, O_CLOEXEC) != 0) quit_pipe[0] = quit_pipe[1] = -1;
  });
  if (quit_pipe[0] < 0 || quit_watcher.joinable()) return;
  // Only if nobody else handles SIGQUIT (a program's own handler, or an ignore).
  struct sigaction old{};
  if (sigaction(SIGQUIT, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return;
  quit_watcher = std::thread([] {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    quit_thread();
  });
  struct sigaction sa{};
  sa.sa_handler = on_sigquit;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGQUIT, &sa, nullptr);
}

void uninstall_sigquit_dump() {
  if (!quit_watcher.joinable()) return;
  // Back to the default, unless the program put a handler of its own since.
  struct sigaction now{};
  if (sigaction(SIGQUIT, nullptr, &now) == 0 && now.sa_handler == on_sigquit) {
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGQUIT, &dfl, nullptr);
  }
  const char stop = 0;
  if (write(quit_pipe[1], &stop, 1) < 0) {
  }
  quit_watcher.join();
}

}  // namespace goro::detail

namespace goro::debug {

using namespace goro::detail;

std::vector<Goroutine> goroutines() {
  Collect c;
  c.now = coarse_nanotime();
  if (!sched.running.load(std::memory_order_acquire)) return {};
  for_each_g(collect_one, &c);
  std::sort(c.list.begin(), c.list.end(),
            [](const Goroutine& a, const Goroutine& b) { return a.id < b.id; });
  return std::move(c.list);
}

std::string goroutine_dump(int debug) {
  std::vector<Goroutine> all = goroutines();
  std::string out;
  auto append_frames = [&out](const Goroutine& g) {
    for (const std::string& f : g.frames) {
      out.append(f);
      out.push_back('\n');
    }
    if (!g.stack_note.empty()) out.append("(" + g.stack_note + ")\n");
    if (!g.created_by.empty() || g.parent_id != 0) {
      out.append("created by ");
      out.append(g.created_by.empty() ? "?" : g.created_by);
      if (g.parent_id != 0) out.append(" in goroutine " + std::to_string(g.parent_id));
      out.push_back('\n');
    }
  };
  if (debug >= 2) {
    for (const Goroutine& g : all) {
      out.append("goroutine " + std::to_string(g.id));
      if (!g.name.empty()) out.append(" \"" + g.name + "\"");
      out.append(" [" + g.state + waited(g.waiting_ns) + "]:\n");
      append_frames(g);
      out.push_back('\n');
    }
    return out;
  }
  // Grouped: same state (without the descriptor number), same frames, same creator.
  struct Group {
    const Goroutine* first = nullptr;
    std::size_t count = 0;
  };
  std::map<std::string, Group> groups;
  for (const Goroutine& g : all) {
    std::string state = g.state;
    if (const std::size_t fd = state.find(" fd "); fd != std::string::npos) state.resize(fd);
    std::string key = state + "|" + g.name + "|" + g.created_by + "|" + g.stack_note;
    for (std::uintptr_t pc : g.pcs) key += "|" + std::to_string(pc);
    Group& grp = groups[key];
    if (grp.first == nullptr) grp.first = &g;
    grp.count++;
  }
  std::vector<Group> sorted;
  for (auto& [key, grp] : groups) sorted.push_back(grp);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const Group& a, const Group& b) { return a.count > b.count; });
  out.append("goroutine profile: total " + std::to_string(all.size()) + "\n\n");
  for (const Group& grp : sorted) {
    std::string state = grp.first->state;
    if (const std::size_t fd = state.find(" fd "); fd != std::string::npos) state.resize(fd);
    out.append(std::to_string(grp.count) + " [" + state + "]");
    if (!grp.first->name.empty()) out.append(" \"" + grp.first->name + "\"");
    out.append(":\n");
    append_frames(*grp.first);
    out.push_back('\n');
  }
  return out;
}

std::string goroutine_dump_json() {
  std::vector<Goroutine> all = goroutines();
  std::string out = "{\"goroutines\":[";
  bool first = true;
  for (const Goroutine& g : all) {
    if (!first) out.push_back(',');
    first = false;
    out.append("{\"id\":" + std::to_string(g.id) + ",\"name\":");
    append_json_string(out, g.name);
    out.append(",\"state\":");
    append_json_string(out, g.state);
    char secs[48];
    if (g.waiting_ns >= 0) {
      std::snprintf(secs, sizeof secs, "%.3f", static_cast<double>(g.waiting_ns) / 1e9);
    } else {
      std::snprintf(secs, sizeof secs, "null");
    }
    out.append(",\"waiting_seconds\":");
    out.append(secs);
    out.append(",\"parent\":" + std::to_string(g.parent_id) + ",\"created_by\":");
    append_json_string(out, g.created_by);
    out.append(",\"frames\":[");
    for (std::size_t i = 0; i < g.frames.size(); ++i) {
      if (i > 0) out.push_back(',');
      append_json_string(out, g.frames[i]);
    }
    out.append("],\"stack_note\":");
    append_json_string(out, g.stack_note);
    out.push_back('}');
  }
  out.append("]}\n");
  return out;
}

void dump(std::FILE* out) {
  const std::string text = goroutine_dump(2);
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
}

namespace {

struct NamedCounter {
  const char* name;
  std::uint64_t ProcStats::*field;
};
constexpr NamedCounter kProcCounters[] = {
    {"runs", &ProcStats::runs},
    {"runnext_runs", &ProcStats::runnext_runs},
    {"steals", &ProcStats::steals},
    {"stolen_gs", &ProcStats::stolen_gs},
    {"global_fair", &ProcStats::global_fair},
    {"global_batches", &ProcStats::global_batches},
    {"global_batch_gs", &ProcStats::global_batch_gs},
    {"overflows", &ProcStats::overflows},
};

}  // namespace

std::string sched_text() {
  if (!sched.running.load(std::memory_order_acquire)) return "runtime not running\n";
  std::string out = schedtrace_line(nanotime()) + "\n";
  const std::vector<ProcStats> procs = proc_stats();
  for (std::size_t i = 0; i < procs.size(); ++i) {
    out += "P" + std::to_string(i) + ":";
    for (const NamedCounter& c : kProcCounters)
      out += std::string(" ") + c.name + "=" + std::to_string(procs[i].*(c.field));
    out += "\n";
  }
  out += "goroutines=" + std::to_string(num_goroutine()) +
         " threads=" + std::to_string(thread_count()) +
         " idle_threads=" + std::to_string(idle_threads()) +
         " handoffs=" + std::to_string(handoffs()) +
         " preemptions=" + std::to_string(preemptions()) +
         " sysmon_wakeups=" + std::to_string(sysmon_wakeups()) + "\n";
  return out;
}

std::string sched_json() {
  if (!sched.running.load(std::memory_order_acquire)) return "{\"running\":false}\n";
  std::string out = "{\"running\":true,\"schedtrace\":";
  append_json_string(out, schedtrace_line(nanotime()));
  out += ",\"gomaxprocs\":" + std::to_string(maxprocs()) +
         ",\"goroutines\":" + std::to_string(num_goroutine()) +
         ",\"threads\":" + std::to_string(thread_count()) +
         ",\"idle_threads\":" + std::to_string(idle_threads()) +
         ",\"handoffs\":" + std::to_string(handoffs()) +
         ",\"preemptions\":" + std::to_string(preemptions()) +
         ",\"sysmon_wakeups\":" + std::to_string(sysmon_wakeups()) + ",\"procs\":[";
  const std::vector<ProcStats> procs = proc_stats();
  for (std::size_t i = 0; i < procs.size(); ++i) {
    out += i == 0 ? "{" : ",{";
    out += "\"id\":" + std::to_string(i);
    for (const NamedCounter& c : kProcCounters)
      out += std::string(",\"") + c.name + "\":" + std::to_string(procs[i].*(c.field));
    out += "}";
  }
  out += "]}\n";
  return out;
}

std::string trace_json(std::chrono::nanoseconds window) {
  if (!sched.running.load(std::memory_order_acquire)) return {};
  const std::int64_t from = nanotime();
  trace_window_begin();
  goro::sleep(window);
  return trace_window_end(from);
}

}  // namespace goro::debug
