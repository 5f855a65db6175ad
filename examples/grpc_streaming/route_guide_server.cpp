// goro-grpc-route-guide-server: routeguide.RouteGuide on h2c until SIGINT or SIGTERM.
//
//   goro-grpc-route-guide-server [--port 50052]
//
// The features are a 10 x 10 grid named "feature (lat, lon)". RouteChat keeps the notes
// of every call in one map behind a goro::Mutex: calls run in parallel goroutines.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <goro/grpc/grpc.hpp>
#include <goro/net/listener.hpp>
#include <goro/scheduler/mutex.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/signal.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "route_guide.goro.grpc.hpp"

namespace {

using goro::grpc::ServerContext;
using goro::grpc::Status;

bool inside(const routeguide::Rectangle& r, const routeguide::Point& p) {
  const auto [lo_lat, hi_lat] = std::minmax(r.lo().latitude(), r.hi().latitude());
  const auto [lo_lon, hi_lon] = std::minmax(r.lo().longitude(), r.hi().longitude());
  return p.latitude() >= lo_lat && p.latitude() <= hi_lat && p.longitude() >= lo_lon &&
         p.longitude() <= hi_lon;
}

class RouteGuideImpl final : public routeguide::RouteGuide::Service {
 public:
  RouteGuideImpl() {
    for (int lat = 0; lat < 10; ++lat) {
      for (int lon = 0; lon < 10; ++lon) {
        routeguide::Feature f;
        f.set_name("feature (" + std::to_string(lat) + ", " + std::to_string(lon) + ")");
        f.mutable_location()->set_latitude(lat);
        f.mutable_location()->set_longitude(lon);
        features_.push_back(std::move(f));
      }
    }
  }

  Status ListFeatures(ServerContext&, const routeguide::Rectangle& rectangle,
                      goro::grpc::ServerWriter<routeguide::Feature>& writer) override {
    for (const routeguide::Feature& f : features_) {
      // write parks while the client is slow to read (HTTP/2 flow control).
      if (inside(rectangle, f.location()) && !writer.write(f)) {
        return Status(goro::grpc::StatusCode::cancelled, "client went away");
      }
    }
    return {};
  }

  Status RecordRoute(ServerContext&, goro::grpc::ServerReader<routeguide::Point>& reader,
                     routeguide::RouteSummary* summary) override {
    const auto start = std::chrono::steady_clock::now();
    routeguide::Point point, previous;
    int points = 0, on_features = 0, distance = 0;
    while (reader.read(&point)) {
      if (points > 0) {
        distance += std::abs(point.latitude() - previous.latitude()) +
                    std::abs(point.longitude() - previous.longitude());
      }
      if (point.latitude() >= 0 && point.latitude() < 10 && point.longitude() >= 0 &&
          point.longitude() < 10) {
        ++on_features;
      }
      previous = point;
      ++points;
    }
    summary->set_point_count(points);
    summary->set_feature_count(on_features);
    summary->set_distance(distance);
    summary->set_elapsed_time(static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(
                                                   std::chrono::steady_clock::now() - start)
                                                   .count()));
    return {};
  }

  Status RouteChat(ServerContext&,
                   goro::grpc::ServerReaderWriter<routeguide::RouteNote, routeguide::RouteNote>&
                       stream) override {
    routeguide::RouteNote note;
    while (stream.read(&note)) {
      const std::pair<int, int> key{note.location().latitude(), note.location().longitude()};
      std::vector<routeguide::RouteNote> earlier;
      {
        std::lock_guard lock(mu_);
        earlier = notes_[key];
        notes_[key].push_back(note);
      }
      for (const routeguide::RouteNote& n : earlier) {
        if (!stream.write(n)) return Status(goro::grpc::StatusCode::cancelled, "client went away");
      }
    }
    return {};
  }

 private:
  std::vector<routeguide::Feature> features_;
  goro::Mutex mu_;
  std::map<std::pair<int, int>, std::vector<routeguide::RouteNote>> notes_;  // guarded by mu_
};

}  // namespace

int main(int argc, char** argv) {
  std::string port = "50052";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string_view(argv[i]) == "--port") port = argv[i + 1];
  }
  return goro::run([&] {
    goro::Result<goro::net::Listener> listener = goro::net::listen("tcp", "0.0.0.0:" + port);
    if (!listener) {
      std::fprintf(stderr, "listen :%s: %s\n", port.c_str(), listener.error().message().c_str());
      return 1;
    }
    RouteGuideImpl guide;
    goro::grpc::Server server;
    server.register_service(guide);
    goro::Chan<int> signals(1);
    goro::signal_notify(signals, {SIGINT, SIGTERM});
    goro::WaitGroup stopped;
    stopped.add(1);
    goro::go([&] {
      signals.recv();
      server.shutdown(std::chrono::steady_clock::now() + std::chrono::seconds(5));
      stopped.done();
    });
    std::printf("route guide listening on %s\n", listener->addr().to_string().c_str());
    std::fflush(stdout);
    server.serve(*listener);
    stopped.wait();
    return 0;
  });
}
