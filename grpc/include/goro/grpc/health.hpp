// grpc.health.v1.Health, as Kubernetes' gRPC probes and grpc_health_probe call it.
//
// Check answers the serving status of a service name ("" for the whole server); Watch
// streams it, sending the current status at once and again at each change. A name that
// was never set answers NOT_FOUND to Check and SERVICE_UNKNOWN to Watch, as the spec
// says. The Server keeps "" in step with itself: SERVING while it serves, NOT_SERVING
// once shutdown begins.
#pragma once

#include <memory>
#include <string_view>

namespace goro::grpc {

enum class ServingStatus { unknown = 0, serving = 1, not_serving = 2, service_unknown = 3 };

class HealthService {
 public:
  HealthService();
  ~HealthService();
  HealthService(const HealthService&) = delete;
  HealthService& operator=(const HealthService&) = delete;

  void set_serving(std::string_view service, ServingStatus status);
  ServingStatus serving(std::string_view service) const;
  // Every service NOT_SERVING from now on (shutdown); set_serving is then ignored.
  void shutdown();

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace goro::grpc
