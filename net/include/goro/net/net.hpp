// goro::net — sockets on the goro runtime: everything in one include.
#pragma once

#include <goro/net/activation.hpp>
#include <goro/net/addr.hpp>
#include <goro/net/conn.hpp>
#include <goro/net/dial.hpp>
#include <goro/net/errors.hpp>
#include <goro/net/listener.hpp>
#include <goro/net/packet_conn.hpp>
#include <goro/base/result.hpp>
#include <goro/net/stream.hpp>
#include <goro/net/tls.hpp>
#include <goro/net/wait_fd.hpp>
