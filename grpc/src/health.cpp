// grpc.health.v1.Health (health.hpp): the statuses, and the service over them.
//
// Watchers each own a one-token channel; a change of any status wakes them all, and each
// compares the status it last sent with the current one. A token, not a queue, so a
// watcher that is slow to send skips to the newest status, as the protocol allows.
#include <goro/grpc/health.hpp>

#include <map>
#include <mutex>
#include <set>
#include <string>

#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/select.hpp>

#include "builtin_services.hpp"
#include "grpc/health/v1/health.pb.h"

namespace goro::grpc {

struct HealthService::Impl {
  mutable goro::Mutex mu;
  std::map<std::string, ServingStatus, std::less<>> statuses;  // guarded by mu
  std::set<goro::Chan<int>*> watchers;                         // guarded by mu
  bool shut_down = false;                                      // guarded by mu

  void notify() {  // caller holds mu
    for (goro::Chan<int>* w : watchers) (void)w->try_send(0);
  }
  // The status of service, or nullopt when never set.
  std::optional<ServingStatus> find(std::string_view service) const {
    std::lock_guard lock(mu);
    auto it = statuses.find(service);
    if (it == statuses.end()) return std::nullopt;
    return it->second;
  }
};

HealthService::HealthService() : impl_(std::make_unique<Impl>()) {}
HealthService::~HealthService() = default;

void HealthService::set_serving(std::string_view service, ServingStatus status) {
  std::lock_guard lock(impl_->mu);
  if (impl_->shut_down) return;
  auto it = impl_->statuses.find(service);
  if (it == impl_->statuses.end())
    impl_->statuses.emplace(std::string(service), status);
  else
    it->second = status;
  impl_->notify();
}

ServingStatus HealthService::serving(std::string_view service) const {
  return impl_->find(service).value_or(ServingStatus::service_unknown);
}

void HealthService::shutdown() {
  std::lock_guard lock(impl_->mu);
  impl_->shut_down = true;
  for (auto& [name, status] : impl_->statuses) status = ServingStatus::not_serving;
  impl_->notify();
}

namespace detail {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

class HealthServiceHandler final : public Service {
 public:
  explicit HealthServiceHandler(HealthService& health)
      : Service("grpc.health.v1.Health"), health_(health.impl()) {
    add_method("Check", CallKind::unary, [this](ServerCall& call) {
      return serve_unary<HealthCheckRequest, HealthCheckResponse>(
          call, [this](ServerContext&, const HealthCheckRequest& req, HealthCheckResponse* resp) {
            std::optional<ServingStatus> s = health_.find(req.service());
            if (!s) return Status(StatusCode::not_found, "unknown service");
            resp->set_status(static_cast<HealthCheckResponse::ServingStatus>(*s));
            return Status();
          });
    });
    add_method("Watch", CallKind::server_streaming, [this](ServerCall& call) {
      return serve_server_streaming<HealthCheckRequest, HealthCheckResponse>(
          call,
          [this](ServerContext& ctx, const HealthCheckRequest& req,
                 ServerWriter<HealthCheckResponse>& writer) { return watch(ctx, req, writer); });
    });
  }

 private:
  Status watch(ServerContext& ctx, const HealthCheckRequest& req,
               ServerWriter<HealthCheckResponse>& writer) {
    goro::Chan<int> changed(1);
    {
      std::lock_guard lock(health_.mu);
      health_.watchers.insert(&changed);
    }
    struct Unwatch {
      HealthService::Impl& h;
      goro::Chan<int>* c;
      ~Unwatch() {
        std::lock_guard lock(h.mu);
        h.watchers.erase(c);
      }
    } unwatch{health_, &changed};
    std::optional<ServingStatus> last;
    for (;;) {
      bool shut_down;
      ServingStatus now;
      {
        std::lock_guard lock(health_.mu);
        auto it = health_.statuses.find(req.service());
        now = it == health_.statuses.end() ? ServingStatus::service_unknown : it->second;
        shut_down = health_.shut_down;
      }
      if (!last || *last != now) {
        HealthCheckResponse resp;
        resp.set_status(static_cast<HealthCheckResponse::ServingStatus>(now));
        if (!writer.write(resp)) return Status(StatusCode::cancelled, "grpc: the watcher left");
        last = now;
      }
      // After shutdown nothing changes any more: the watch ends, so that the server's
      // graceful stop does not wait for it.
      if (shut_down) return Status(StatusCode::unavailable, "grpc: the server is shutting down");
      const Context& c = ctx.context();
      if (goro::select(goro::recv_case(changed), goro::recv_case(c.done())) == 1)
        return Status(StatusCode::cancelled, "grpc: the call was cancelled");
    }
  }

  HealthService::Impl& health_;
};

}  // namespace

std::unique_ptr<Service> make_health_service(HealthService& health) {
  return std::make_unique<HealthServiceHandler>(health);
}

}  // namespace detail
}  // namespace goro::grpc
