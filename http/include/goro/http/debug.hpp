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
//   GET /debug/goro/pprof/               the pprof profiles offered, and why there is no heap
//   GET /debug/goro/pprof/profile?seconds=N
//                                        a CPU profile of the whole process, sampled at
//                                        100 Hz per thread for N seconds (default 30, at
//                                        most 60), in pprof's format (gzip-compressed
//                                        profile.proto, symbolized), for
//                                        go tool pprof http://HOST/debug/goro/pprof/profile
//                                        One at a time: a second one meanwhile gets 503.
//                                        docs/design.md, "CPU profiles", has the limits.
//   GET /debug/goro/pprof/goroutine      the goroutines' stacks as Go's goroutine profile
//
// Stacks and internals are not for the open Internet: mount these on a listener bound to
// 127.0.0.1 or a private network, or behind authentication middleware.
#pragma once

#include <goro/http/server.hpp>

namespace goro::http::debug {

// The handler for a "/prefix/" subtree: it answers by the last segment of the path.
Handler handler();

}  // namespace goro::http::debug
