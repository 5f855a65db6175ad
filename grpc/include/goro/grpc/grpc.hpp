// goro::grpc — gRPC on goroutines (docs/grpc.md).
#pragma once

#include <goro/grpc/call.hpp>
#include <goro/grpc/client.hpp>
#include <goro/grpc/health.hpp>
#include <goro/grpc/metadata.hpp>
#include <goro/grpc/server.hpp>
#include <goro/grpc/service.hpp>
#include <goro/grpc/status.hpp>
