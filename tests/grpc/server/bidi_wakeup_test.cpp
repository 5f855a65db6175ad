// A bidirectional call whose reader and writer are parked on the same HTTP/2 stream at
// once (http/src/h2/stream.cpp): the writer waiting for flow-control room, the reader for
// the next request message. Room made by one WINDOW_UPDATE is one wake-up, and it must
// reach the writer. Driven frame by frame from a raw HTTP/2 client, so that exactly one
// wake-up happens while both wait.
#include <gtest/gtest.h>

#include <atomic>

#include <goro/grpc/server.hpp>
#include <goro/grpc/service.hpp>
#include <goro/scheduler/chan.hpp>
#include <goro/scheduler/runtime.hpp>
#include <goro/scheduler/waitgroup.hpp>

#include "goro/test/echo.pb.h"
#include "h2_test_util.hpp"

namespace goro::grpc::test {
namespace {

using ::goro::test::EchoReply;
using ::goro::test::EchoRequest;
using http::test::Clock;
using http::test::RawH2;

// Larger than the stream's write buffer (http::ServerOptions::write_buffer_size, 64 KiB),
// so that the writer parks until the client opens its window.
constexpr std::size_t kReplyPayload = 70000;

// goro.test.Wake/Bidi: a goroutine reads requests; the handler answers each with a
// kReplyPayload-byte reply and counts the writes that returned.
class WakeService final : public Service {
 public:
  WakeService() : Service("goro.test.Wake") {
    add_method("Bidi", CallKind::bidi_streaming, [this](ServerCall& call) {
      return serve_bidi_streaming<EchoRequest, EchoReply>(
          call, [this](ServerContext&, ServerReaderWriter<EchoReply, EchoRequest>& stream) {
            goro::Chan<int> requests(1);
            goro::WaitGroup reader;
            reader.add(1);
            goro::go([&] {
              EchoRequest req;
              while (stream.read(&req)) requests.send(1);
              requests.close();
              reader.done();
            });
            while (requests.recv()) {
              EchoReply reply;
              reply.set_payload(std::string(kReplyPayload, 'b'));
              if (!stream.write(reply)) break;
              writes_done.fetch_add(1);
            }
            reader.wait();
            return Status();
          });
    });
  }
  std::atomic<int> writes_done{0};
};

class BidiWakeup : public ::testing::TestWithParam<int> {};

TEST_P(BidiWakeup, RoomForTheWriterWakesTheWriterWhileTheReaderWaits) {
  WakeService wake;
  Server grpc_server;
  grpc_server.register_service(wake);
  http::test::H2Server server(grpc_server.handler(), {}, std::nullopt, GetParam());

  RawH2 raw(server.port(), /*handshake=*/false);
  raw.send_raw(RawH2::kPreface);
  // SETTINGS_INITIAL_WINDOW_SIZE = 0: the server may send no DATA until told.
  raw.send_frame(NGHTTP2_SETTINGS, 0, 0, std::string("\x00\x04\x00\x00\x00\x00", 6));
  raw.send_headers(1,
                   {{":method", "POST"},
                    {":scheme", "http"},
                    {":authority", "localhost"},
                    {":path", "/goro.test.Wake/Bidi"},
                    {"content-type", "application/grpc"},
                    {"te", "trailers"}},
                   /*end_stream=*/false);
  raw.send_frame(NGHTTP2_DATA, 0, 1, std::string(5, '\0'));  // one empty request message

  ASSERT_TRUE(raw.wait_for(NGHTTP2_HEADERS, 1)) << "no response head";
  // Both goroutines park: the writer on the closed window, the reader on the next message.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(wake.writes_done.load(), 0) << "the write finished with no window";

  // Room for one DATA frame: afterwards what waits is within the write buffer, so the
  // write returns, if its goroutine hears of it.
  const std::uint32_t increment = 8000;
  std::string update(4, '\0');
  for (int i = 0; i < 4; ++i) update[i] = static_cast<char>(increment >> (24 - 8 * i));
  raw.send_frame(NGHTTP2_WINDOW_UPDATE, 0, 1, update);

  const auto deadline = Clock::now() + std::chrono::seconds(3);
  while (wake.writes_done.load() == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(wake.writes_done.load(), 1) << "the writer missed its wake-up";

  raw.send_frame(NGHTTP2_RST_STREAM, 0, 1, std::string("\x00\x00\x00\x08", 4));  // CANCEL
  server.stop();
}

INSTANTIATE_TEST_SUITE_P(Procs, BidiWakeup, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

}  // namespace
}  // namespace goro::grpc::test
