// Read-only views of the scheduler for tests and tools (detail/introspect.hpp).

#include <goro/scheduler/detail/introspect.hpp>

#include <cstdlib>
#include <utility>
#include <vector>

#include <sys/mman.h>

#include <goro/scheduler/runtime.hpp>

#include "goroutine.hpp"
#include "netpoll.hpp"
#include "sched.hpp"
#include "stack.hpp"

namespace goro::detail {

std::vector<ProcStats> proc_stats() {
  std::vector<ProcStats> out;
  for (P* pp : sched.all_p) {
    ProcStats s;
    s.runnext_runs = pp->stats.runnext_runs.load(std::memory_order_relaxed);
    s.global_fair = pp->stats.global_fair.load(std::memory_order_relaxed);
    s.global_batches = pp->stats.global_batches.load(std::memory_order_relaxed);
    s.global_batch_gs = pp->stats.global_batch_gs.load(std::memory_order_relaxed);
    s.overflows = pp->stats.overflows.load(std::memory_order_relaxed);
    s.steals = pp->stats.steals.load(std::memory_order_relaxed);
    s.stolen_gs = pp->stats.stolen_gs.load(std::memory_order_relaxed);
    s.runs = pp->stats.runs.load(std::memory_order_relaxed);
    out.push_back(s);
  }
  return out;
}

int current_p() {
  RuntimeScope scope;
  M* m = this_m();
  return (m && m->p) ? m->p->id : -1;
}

std::uint32_t local_runq_size() {
  RuntimeScope scope;
  M* m = this_m();
  if (!m || !m->p) return 0;
  return m->p->runq.size() + (m->p->runq.runnext.load() ? 1 : 0);
}

int global_runq_size() { return sched.runq_size.load(std::memory_order_relaxed); }
int spinning_ms() { return sched.nmspinning.load(std::memory_order_relaxed); }
int idle_ps() { return sched.npidle.load(std::memory_order_relaxed); }
int thread_count() { return sched.mcount.load(std::memory_order_relaxed); }
int idle_threads() {
  sched.lock.lock();
  int n = sched.nmidle;
  sched.lock.unlock();
  return n;
}
std::uint64_t sysmon_wakeups() { return sched.sysmon_wakeups.load(std::memory_order_relaxed); }
std::uint64_t handoffs() { return sched.handoffs.load(std::memory_order_relaxed); }
std::uint64_t preemptions() { return sched.preemptions.load(std::memory_order_relaxed); }

namespace {

struct StatsPass {
  RuntimeStats* stats;
  std::vector<std::pair<char*, std::size_t>>* stacks;
};

void count_state(G* g, void* arg) {
  auto* pass = static_cast<StatsPass*>(arg);
  RuntimeStats* s = pass->stats;
  if (g->stack.lo != nullptr) pass->stacks->emplace_back(g->stack.lo, g->stack.size());
  switch (g->status.load(std::memory_order_relaxed)) {
    case GStatus::running: s->running++; break;
    case GStatus::runnable: s->runnable++; break;
    case GStatus::waiting:
    case GStatus::scanning: s->waiting++; break;
    case GStatus::syscall: s->syscall++; break;
    case GStatus::dead: break;
  }
}
}  // namespace

}  // namespace goro::detail

namespace goro {

RuntimeStats stats() {
  using namespace goro::detail;
  RuntimeStats s;
  if (!sched.running.load(std::memory_order_acquire)) return s;
  std::vector<std::pair<char*, std::size_t>> stacks;
  StatsPass pass{&s, &stacks};
  for_each_g(count_state, &pass);
  // Outside the goroutine list's lock: a stack unmapped meanwhile fails with ENOMEM and
  // counts as not resident.
  const std::size_t page = page_size();
  std::vector<unsigned char> resident;
  for (auto [lo, size] : stacks) {
    s.stack_reserved_bytes += size;
    resident.resize((size + page - 1) / page);
    if (mincore(lo, size, resident.data()) != 0) continue;
    for (unsigned char r : resident) s.stack_committed_bytes += (r & 1) * page;
  }
  s.goroutines = s.running + s.runnable + s.waiting + s.syscall;
  s.procs = sched.gomaxprocs;
  s.idle_procs = idle_ps();
  s.threads = thread_count();
  s.idle_threads = idle_threads();
  s.spinning_threads = spinning_ms();
  s.global_runqueue = global_runq_size();
  for (P* pp : sched.all_p) {
    s.local_runqueues += static_cast<int>(pp->runq.size());
    s.goroutine_runs += pp->stats.runs.load(std::memory_order_relaxed);
    s.steals += pp->stats.steals.load(std::memory_order_relaxed);
  }
  s.netpoll_waiters = netpoll_waiter_count();
  s.handoffs = handoffs();
  s.preemptions = preemptions();
  s.sysmon_wakeups = sysmon_wakeups();
  return s;
}

}  // namespace goro
