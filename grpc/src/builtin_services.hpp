// The services every goro::grpc::Server can serve by itself (internal): the health
// service and server reflection, written by hand on Service::add_method over the
// messages protoc generates from grpc/proto/.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <goro/grpc/health.hpp>
#include <goro/grpc/service.hpp>
#include <goro/scheduler/context.hpp>

namespace goro::grpc::detail {

// grpc.health.v1.Health over health's statuses; a Watch also ends when stop is cancelled
// (the server's shutdown).
std::unique_ptr<Service> make_health_service(HealthService& health);

// grpc.reflection.v1alpha.ServerReflection (v1: false) or grpc.reflection.v1 (true),
// answering from the generated descriptor pool; services: the names list_services
// answers (read when a request comes, after registration is over).
std::unique_ptr<Service> make_reflection_service(bool v1, const std::vector<std::string>* services);

}  // namespace goro::grpc::detail
