// <goro/goro.hpp>: the one header an application includes first. It brings in the
// public headers of every goro layer that is part of the build:
//
//   scheduler  goro::run, goro::go, goro::sleep, goro::yield, goro::blocking,
//              Chan and select (with timeout cases), Mutex, WaitGroup, Cond, Once,
//              Context (cancellation, deadlines, values), signal_notify
//   net        Listener, Conn, dial, deadlines, TLS              (goro::net)
//   http       Server, Router, Request, ResponseWriter, Client   (goro::http)
//   app        goro::App: flags, signals, graceful shutdown around a Server
//
// Link goro::framework (CMake: find_package(goro) + target_link_libraries(app PRIVATE
// goro::framework)) and every layer below comes with it. A layer's headers are included
// only when that layer is in the build (__has_include: its include folder is on the
// path), so an application that needs only the runtime can include this header and
// link goro::scheduler alone.
//
// Headers of one layer can also be included one by one: <goro/scheduler/chan.hpp>, ...
#pragma once

// ---- scheduler (always there) ---------------------------------------------------
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/cond.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/local.hpp>
#include <goro/scheduler/once.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/select.hpp>
#include <goro/scheduler/signal.hpp>
#include <goro/scheduler/waitgroup.hpp>

// ---- net -------------------------------------------------------------------------
#if __has_include(<goro/net/net.hpp>)
#include <goro/net/net.hpp>
#endif

// ---- http ------------------------------------------------------------------------
#if __has_include(<goro/http/http.hpp>)
#include <goro/app.hpp>
#include <goro/http/http.hpp>
#endif
