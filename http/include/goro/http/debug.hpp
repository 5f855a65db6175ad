// goro::http::debug: the runtime's state over HTTP, off unless mounted.
//
//   router.handle("/debug/goro/", goro::http::debug::handler());
//
//   GET /debug/goro/                     an index of what follows
//   GET /debug/goro/goroutines           every goroutine with its state and stack (Go's
//                                        goroutine?debug=2); ?debug=1 groups identical
//                                        stacks with a count; ?format=json
//   GET /debug/goro/sched                the scheduler: the GORO_SCHEDTRACE line, per-P
//                                        counters, threads; ?format=json
//   GET /debug/goro/trace?seconds=N      what the scheduler did for the next N seconds
//                                        (default 1, at most 60), as Chrome trace-event
//                                        JSON for ui.perfetto.dev
//
// Stacks and internals are not for the open Internet: mount these on a listener bound to
// 127.0.0.1 or a private network, or behind authentication middleware.
#pragma once

#include <goro/http/server.hpp>

namespace goro::http::debug {

// The handler for a "/prefix/" subtree: it answers by the last segment of the path.
Handler handler();

}  // namespace goro::http::debug
