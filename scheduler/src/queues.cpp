// The out-of-line parts of queues.hpp.

#include "queues.hpp"

namespace goro::detail {

void globrunqput(G* g) {
  sched.runq.push(g);
  sched.runq_size.fetch_add(1, std::memory_order_seq_cst);
}

void globrunqput_spill(P* pp, G** batch, std::uint32_t n) {
  sched.lock.lock();
  for (std::uint32_t i = 0; i < n; ++i) sched.runq.push(batch[i]);
  sched.runq_size.fetch_add(static_cast<std::int32_t>(n), std::memory_order_seq_cst);
  sched.lock.unlock();
  pp->stats.overflows.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace goro::detail
