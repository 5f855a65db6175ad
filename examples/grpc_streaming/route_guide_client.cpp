// goro-grpc-route-guide-client: calls each RouteGuide method once and prints what comes
// back. RouteChat writes from one goroutine while this one reads.
//
//   goro-grpc-route-guide-client [--target 127.0.0.1:50052]
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

#include <goro/grpc/grpc.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "route_guide.goro.grpc.hpp"

namespace {

routeguide::Point point(int latitude, int longitude) {
  routeguide::Point p;
  p.set_latitude(latitude);
  p.set_longitude(longitude);
  return p;
}

bool report(std::string_view method, const goro::grpc::Status& status) {
  if (!status.ok()) std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(method.size()), method.data(),
                                 status.to_string().c_str());
  return status.ok();
}

}  // namespace

int main(int argc, char** argv) {
  std::string target = "127.0.0.1:50052";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string_view(argv[i]) == "--target") target = argv[i + 1];
  }
  return goro::run([&] {
    routeguide::RouteGuide::Stub stub(goro::grpc::Channel::create(target));
    bool ok = true;

    {  // Server streaming: read until the end of the stream, then the status.
      goro::grpc::ClientContext ctx;
      ctx.set_timeout(std::chrono::seconds(5));
      routeguide::Rectangle rectangle;
      *rectangle.mutable_lo() = point(2, 2);
      *rectangle.mutable_hi() = point(3, 4);
      auto reader = stub.ListFeatures(ctx, rectangle);
      routeguide::Feature feature;
      while (reader->read(&feature)) std::printf("ListFeatures: %s\n", feature.name().c_str());
      ok = report("ListFeatures", reader->finish()) && ok;
    }

    {  // Client streaming: write the points, then finish() returns the one response.
      goro::grpc::ClientContext ctx;
      ctx.set_timeout(std::chrono::seconds(5));
      routeguide::RouteSummary summary;
      auto writer = stub.RecordRoute(ctx, &summary);
      for (int i = 0; i < 12; ++i) {
        if (!writer->write(point(i, i / 2))) break;
      }
      if (report("RecordRoute", writer->finish())) {
        std::printf("RecordRoute: %d points, %d on features, distance %d\n", summary.point_count(),
                    summary.feature_count(), summary.distance());
      } else {
        ok = false;
      }
    }

    {  // Bidirectional: a goroutine writes while this one reads.
      goro::grpc::ClientContext ctx;
      ctx.set_timeout(std::chrono::seconds(5));
      auto stream = stub.RouteChat(ctx);
      goro::WaitGroup writer;
      writer.add(1);
      goro::go([&] {
        const char* messages[] = {"first", "second", "third", "fourth"};
        for (int i = 0; i < 4; ++i) {
          routeguide::RouteNote note;
          *note.mutable_location() = point(i % 2, 0);
          note.set_message(messages[i]);
          if (!stream->write(note)) break;
        }
        stream->writes_done();
        writer.done();
      });
      routeguide::RouteNote note;
      while (stream->read(&note)) {
        std::printf("RouteChat: \"%s\" at (%d, %d)\n", note.message().c_str(),
                    note.location().latitude(), note.location().longitude());
      }
      writer.wait();
      ok = report("RouteChat", stream->finish()) && ok;
    }
    return ok ? 0 : 1;
  });
}
