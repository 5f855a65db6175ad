// goro::http — HTTP/1.1 server, router, middleware, client, static files and WebSockets;
// everything in one include.
#pragma once

#include <goro/http/client.hpp>
#include <goro/http/cookie.hpp>
#include <goro/http/cors.hpp>
#include <goro/http/compress.hpp>
#include <goro/http/debug.hpp>
#include <goro/http/error_reply.hpp>
#include <goro/http/errors.hpp>
#include <goro/http/file_server.hpp>
#include <goro/http/form.hpp>
#include <goro/http/headers.hpp>
#include <goro/http/logger.hpp>
#include <goro/http/metrics.hpp>
#include <goro/http/middleware.hpp>
#include <goro/http/overload.hpp>
#include <goro/http/probes.hpp>
#include <goro/http/request.hpp>
#include <goro/http/response.hpp>
#include <goro/http/router.hpp>
#include <goro/http/server.hpp>
#include <goro/http/status.hpp>
#include <goro/http/trace.hpp>
#include <goro/http/websocket.hpp>
