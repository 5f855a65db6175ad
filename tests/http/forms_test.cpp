// Forms: urlencoded values, multipart read as a stream and parsed whole, and their
// limits, against curl as the client; a 256 MiB upload streamed without being held.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include <goro/http/form.hpp>
#include <goro/http/httptest.hpp>
#include <goro/http/router.hpp>
#include <goro/http/server.hpp>

#include "form_test_util.hpp"
#include "test_util.hpp"

namespace goro::http::test {
namespace {

// A reader over a string, handing out at most `step` bytes a call.
MultipartReader::ReadFn string_source(std::string data, std::size_t step) {
  auto state = std::make_shared<std::pair<std::string, std::size_t>>(std::move(data), 0);
  return [state, step](void* buf, std::size_t len) -> Result<std::size_t> {
    auto& [bytes, at] = *state;
    std::size_t n = std::min({len, step, bytes.size() - at});
    std::memcpy(buf, bytes.data() + at, n);
    at += n;
    return n;
  };
}

struct ReadPart {
  std::string name, filename, content_type, content;
};

// Every part of body, read through the streaming reader with reads of `step` bytes.
std::vector<ReadPart> read_all(const std::string& body, std::size_t step, FormError& error,
                               FormLimits limits = {}) {
  MultipartReader reader(string_source(body, step), "XyZ", limits);
  std::vector<ReadPart> parts;
  while (MultipartPart* part = reader.next_part()) {
    ReadPart p{std::string(part->form_name()), std::string(part->filename()),
               std::string(part->content_type()), {}};
    char buf[5];
    while (true) {
      Result<std::size_t> n = part->read(buf, sizeof buf);
      if (!n || *n == 0) break;
      p.content.append(buf, *n);
    }
    parts.push_back(std::move(p));
  }
  error = reader.error();
  return parts;
}

const std::string kBody =
    "preamble to skip\r\n"
    "--XyZ\r\n"
    "Content-Disposition: form-data; name=\"title\"\r\n"
    "\r\n"
    "hello\r\n--XyZabc is not a boundary\r\n"
    "--XyZ  \r\n"
    "Content-Disposition: form-data; name=\"upload\"; filename=\"C:\\\\dir\\\\a \\\"b\\\".txt\"\r\n"
    "Content-Type: text/plain\r\n"
    "\r\n"
    "line1\r\n\r\n--Xy\r\r\n"
    "--XyZ--\r\n"
    "epilogue";

TEST(Urlencoded, ParsesLikeGo) {
  Values v;
  FormError error;
  EXPECT_TRUE(parse_urlencoded("a=1&b=x+y&a=%C3%A9&&c&=v&d=", v, &error));
  EXPECT_EQ(v.get("a"), "1");
  EXPECT_EQ(v.all("a"), (std::vector<std::string_view>{"1", "\xC3\xA9"}));
  EXPECT_EQ(v.get("b"), "x y");
  EXPECT_TRUE(v.has("c"));
  EXPECT_EQ(v.get("c"), "");
  EXPECT_EQ(v.get(""), "v");
  EXPECT_FALSE(v.has("z"));
  // Sorted by name, as Go's Encode: the same values give the same text.
  EXPECT_EQ(v.encode(), "=v&a=1&a=%C3%A9&b=x+y&c=&d=");
  Values other;
  other.add("b", "x y");
  other.add("", "v");
  other.add("d", "");
  other.add("a", "1");
  other.add("c", "");
  other.add("a", "\xC3\xA9");
  EXPECT_EQ(other.encode(), v.encode());

  Values bad;
  EXPECT_FALSE(parse_urlencoded("a=1&b=%zz&c=%4&d=4", bad, &error));
  EXPECT_EQ(error.status, 400);
  EXPECT_NE(error.message.find("invalid %-escape in \"b=%zz\""), std::string::npos) << error.message;
  EXPECT_EQ(bad.encode(), "a=1&d=4");

  bad.set("a", "x");
  bad.add("a", "y");
  bad.set("a", "z");
  EXPECT_EQ(bad.encode(), "a=z&d=4");
  bad.remove("a");
  EXPECT_EQ(bad.encode(), "d=4");
}

TEST(Multipart, BoundaryFromContentType) {
  std::string b;
  FormError error;
  EXPECT_TRUE(multipart_boundary("multipart/form-data; boundary=----WebKitFormBoundaryA1", b));
  EXPECT_EQ(b, "----WebKitFormBoundaryA1");
  EXPECT_TRUE(multipart_boundary("Multipart/Form-Data;boundary=\"a b:c\"", b));
  EXPECT_EQ(b, "a b:c");
  EXPECT_FALSE(multipart_boundary("multipart/form-data", b, &error));
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.message, "multipart: the Content-Type has no boundary parameter");
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary=\"\"", b, &error));
  EXPECT_NE(error.message.find("invalid boundary"), std::string::npos);
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary=" + std::string(71, 'a'), b, &error));
  EXPECT_NE(error.message.find("invalid boundary"), std::string::npos);
  EXPECT_FALSE(multipart_boundary("application/json", b, &error));
  EXPECT_EQ(error.status, 415);
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary=a; boundary=b", b, &error));
  EXPECT_EQ(error.status, 400);
}

TEST(Multipart, StreamsPartsInAnyReadSizes) {
  for (std::size_t step : {1u, 2u, 3u, 7u, 64u, 100000u}) {
    FormError error;
    std::vector<ReadPart> parts = read_all(kBody, step, error);
    ASSERT_EQ(error.status, 0) << error.message << " step " << step;
    ASSERT_EQ(parts.size(), 2u) << "step " << step;
    EXPECT_EQ(parts[0].name, "title");
    EXPECT_EQ(parts[0].filename, "");
    EXPECT_EQ(parts[0].content, "hello\r\n--XyZabc is not a boundary");
    EXPECT_EQ(parts[1].name, "upload");
    EXPECT_EQ(parts[1].filename, "a \"b\".txt");
    EXPECT_EQ(parts[1].content_type, "text/plain");
    EXPECT_EQ(parts[1].content, "line1\r\n\r\n--Xy\r");
  }
}

// filename* (RFC 5987 / 2231), as Go's mime.ParseMediaType and Part.FileName read it: it
// wins over filename; only UTF-8 and US-ASCII are decoded; continuations are joined.
TEST(Multipart, ExtendedFilenames) {
  auto filename_of = [](const std::string& disposition) {
    const std::string body = "--XyZ\r\nContent-Disposition: " + disposition +
                             "\r\n\r\ndata\r\n--XyZ--\r\n";
    FormError error;
    std::vector<ReadPart> parts = read_all(body, 64, error);
    if (error.status != 0) return "error " + std::to_string(error.status) + ": " + error.message;
    return parts.size() == 1 ? parts[0].name + "|" + parts[0].filename : std::string("no part");
  };
  EXPECT_EQ(filename_of("form-data; name=\"f\"; filename*=UTF-8''%E2%82%AC%20rates.txt"),
            "f|\xE2\x82\xAC rates.txt");
  EXPECT_EQ(filename_of("form-data; name=\"f\"; filename=\"fallback.txt\"; "
                        "filename*=utf-8'en'na%C3%AFve.txt"),
            "f|na\xC3\xAFve.txt");
  EXPECT_EQ(filename_of("form-data; name=f; filename*=us-ascii''plain.txt; filename=\"x.txt\""),
            "f|plain.txt");
  // A charset Go does not decode, or a broken escape: the plain filename stays.
  EXPECT_EQ(filename_of("form-data; name=f; filename=\"latin.txt\"; filename*=iso-8859-1''%E9.txt"),
            "f|latin.txt");
  EXPECT_EQ(filename_of("form-data; name=f; filename=\"kept.txt\"; filename*=UTF-8''bad%zz"),
            "f|kept.txt");
  EXPECT_EQ(filename_of("form-data; name=f; filename=\"kept.txt\"; filename*=no-quotes"), "f|kept.txt");
  // Continuations: plain pieces as they are, starred ones %-decoded, the first an ext-value.
  EXPECT_EQ(filename_of("form-data; name=f; filename*0=\"long \"; filename*1=name.txt"),
            "f|long name.txt");
  EXPECT_EQ(filename_of("form-data; name=f; filename*0*=UTF-8''%C3%A9t%C3%A9; filename*1*=%20;"
                        " filename*2=\"2024.pdf\""),
            "f|\xC3\xA9t\xC3\xA9 2024.pdf");
  EXPECT_EQ(filename_of("form-data; name=f; filename*1=gap.txt"), "f|") << "no piece 0: no filename";
  // Directories go from a decoded name too.
  EXPECT_EQ(filename_of("form-data; name=f; filename*=UTF-8''..%2F..%2Fetc%2Fpasswd"), "f|passwd");
  // The name parameter has its extended form as well.
  EXPECT_EQ(filename_of("form-data; name*=UTF-8''%C3%BC; filename=a"), "\xC3\xBC|a");
  EXPECT_EQ(filename_of("form-data; name=f; filename*=UTF-8''a; filename*=UTF-8''b").substr(0, 9),
            "error 400");
}

TEST(Multipart, MalformedBodiesAreRefusedByName) {
  struct Case {
    std::string body;
    int status;
    std::string message;
    FormLimits limits;
  };
  FormLimits few_parts;
  few_parts.max_parts = 1;
  FormLimits small_headers;
  small_headers.max_header_bytes = 40;
  FormLimits small_body;
  small_body.max_body_bytes = 50;
  const std::string part = "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n";
  const Case cases[] = {
      {part, 400, "the body ends before the closing boundary (truncated)", {}},
      {"--XyZ\r\nContent-Dispo", 400, "the body ends in a part's headers (truncated)", {}},
      {"--XyZ", 400, "the body ends in a boundary line (truncated)", {}},
      {"no boundary at all", 400, "(truncated)", {}},
      {"--XyZ !!\r\n\r\nv\r\n--XyZ--", 400, "malformed boundary line", {}},
      {"--XyZ-x\r\n\r\nv\r\n--XyZ--", 400, "malformed boundary line", {}},
      {"--XyZ\r\nno colon\r\n\r\nv\r\n--XyZ--", 400, "malformed part header line \"no colon\"", {}},
      {"--XyZ\r\n folded: x\r\n\r\nv\r\n--XyZ--", 400, "malformed part header line", {}},
      {"--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\nv\r\n--XyZ--", 400,
       "malformed Content-Disposition", {}},
      {part + part + "--XyZ--", 413, "more than max_parts (1) parts", few_parts},
      {part + "--XyZ--", 413, "header block is larger than max_header_bytes (40)", small_headers},
      {part + part + "--XyZ--", 413, "larger than max_body_bytes (50)", small_body},
  };
  for (const Case& c : cases) {
    for (std::size_t step : {1u, 4096u}) {
      FormError error;
      (void)read_all(c.body, step, error, c.limits);
      EXPECT_EQ(error.status, c.status) << c.body;
      EXPECT_NE(error.message.find(c.message), std::string::npos)
          << "got \"" << error.message << "\" for " << c.body;
    }
  }
}

// The most bytes the process held at once, sampled while it ran.
class RssSampler {
 public:
  RssSampler() : baseline_(rss()), peak_(baseline_) {
    thread_ = std::thread([this] {
      while (!stop_.load(std::memory_order_relaxed)) {
        std::size_t now = rss();
        if (now > peak_.load(std::memory_order_relaxed)) peak_.store(now, std::memory_order_relaxed);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  ~RssSampler() { stop(); }
  void stop() {
    stop_.store(true, std::memory_order_relaxed);
    if (thread_.joinable()) thread_.join();
  }
  std::size_t growth() const { return peak_.load(std::memory_order_relaxed) - baseline_; }

  static std::size_t rss() {
    std::ifstream statm("/proc/self/statm");
    std::size_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  }

 private:
  std::size_t baseline_;
  std::atomic<std::size_t> peak_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::mutex spooled_mu;
std::vector<std::string> spooled_paths;  // guarded by spooled_mu

std::string temp_dir() {
  static const std::string dir = [] {
    std::string d = "/tmp/goro-forms-test-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

Handler app() {
  auto r = std::make_shared<Router>();
  r->handle("POST /form", [](Request& req, ResponseWriter& w) {
    Values v;
    FormLimits limits;
    limits.max_urlencoded_bytes = 100;
    if (!parse_form_or_400(req, w, v, limits)) return;
    // In the order parsed (encode() sorts): the body's pairs, then the query's.
    std::string out;
    for (const auto& [key, value] : v.entries()) out += key + "=" + value + "|";
    w.text(out);
  });
  // Streams every part; a file is counted and checksummed, never held.
  r->handle("POST /stream", [](Request& req, ResponseWriter& w) {
    FormLimits limits;
    limits.max_body_bytes = 1ull << 30;
    MultipartReader reader(req, limits);
    std::string out;
    std::string buf(1 << 16, '\0');
    while (MultipartPart* part = reader.next_part()) {
      Fnv1a sum;
      std::uint64_t size = 0;
      while (true) {
        Result<std::size_t> n = part->read(buf.data(), buf.size());
        if (!n || *n == 0) break;
        sum.update(std::string_view(buf.data(), *n));
        size += *n;
      }
      out += std::string(part->form_name()) + " file=" + std::string(part->filename()) +
             " size=" + std::to_string(size) + " fnv=" + hex(sum.hash) + "\n";
    }
    if (reader.failed()) {
      (void)send_form_error(req, w, reader.error());
      return;
    }
    w.text(out);
  });
  // Parses the whole form; files past 1 MiB in all are spooled.
  r->handle("POST /parse", [](Request& req, ResponseWriter& w) {
    FormLimits limits;
    limits.max_memory_bytes = 1u << 20;
    limits.max_body_bytes = 64u << 20;
    limits.max_parts = 4;
    limits.max_field_bytes = 16;
    limits.temp_dir = temp_dir();
    MultipartForm form;
    if (!parse_multipart_form_or_400(req, w, form, limits)) return;
    std::string out = "values " + form.values.encode() + "\n";
    for (const FormFile& f : form.files) {
      Fnv1a sum;
      std::uint64_t on_disk = 0;
      if (f.path.empty()) {
        sum.update(f.content);
      } else {
        std::ifstream in(f.path, std::ios::binary);
        std::string data((std::istreambuf_iterator<char>(in)), {});
        on_disk = data.size();
        sum.update(data);
        std::lock_guard lock(spooled_mu);
        spooled_paths.push_back(f.path);
      }
      out += f.field + " file=" + f.filename + " type=" + f.content_type +
             " size=" + std::to_string(f.size) + " spooled=" + (f.path.empty() ? "no" : "yes") +
             " on_disk=" + std::to_string(on_disk) + " fnv=" + hex(sum.hash) + "\n";
    }
    w.text(out);
  });
  return [r](Request& req, ResponseWriter& w) { (*r)(req, w); };
}

ServerOptions big_bodies() {
  ServerOptions options;
  options.max_body_bytes = 1ull << 30;
  return options;
}

std::string write_file(const std::string& name, std::size_t size) {
  std::string path = temp_dir() + "/" + name;
  std::ofstream f(path, std::ios::binary);
  std::string chunk;
  for (std::size_t i = 0; i < size; ++i) chunk.push_back(static_cast<char>((i * 7919) % 251));
  f.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  return path;
}

std::string fnv_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), {});
  Fnv1a sum;
  sum.update(data);
  return hex(sum.hash);
}

class FormsCurl : public ::testing::TestWithParam<int> {
 protected:
  TestServer server{app(), big_bodies(), GetParam()};
};

TEST_P(FormsCurl, UrlencodedBodyThenQuery) {
  CurlOutput o = run_curl("-d 'a=1&b=x+y&a=%C3%A9' --data-urlencode 'c=d&e f' '" +
                          server.url("/form?q=2&a=0") + "'");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, "a=1|b=x y|a=\xC3\xA9|c=d&e f|q=2|a=0|");
}

TEST_P(FormsCurl, UrlencodedErrors) {
  CurlOutput o = run_curl("-w '%{http_code}' -d 'a=%zz' " + server.url("/form"));
  EXPECT_EQ(o.out, "400 Bad Request: form: invalid %-escape in \"a=%zz\"\n400");
  o = run_curl("-w '%{http_code}' -d 'a=" + std::string(200, 'x') + "' " + server.url("/form"));
  EXPECT_EQ(o.out, "413 Content Too Large: form: the body is larger than max_urlencoded_bytes (100)\n413");
}

TEST_P(FormsCurl, MultipartFieldsAndFilesStreamed) {
  std::string file = write_file("small.bin", 100000);
  CurlOutput o = run_curl("-F title=hello -F 'upload=@" + file + ";filename=../../x.bin' " +
                          server.url("/stream"));
  ASSERT_EQ(o.status, 0) << o.err;
  Fnv1a hello;
  hello.update("hello");
  EXPECT_EQ(o.out, "title file= size=5 fnv=" + hex(hello.hash) +
                       "\nupload file=x.bin size=100000 fnv=" + fnv_of_file(file) + "\n");
}

TEST_P(FormsCurl, ParsedFormSpoolsBigFilesAndRemovesThem) {
  std::string small = write_file("a.txt", 1000);
  std::string big = write_file("big.bin", 3u << 20);
  {
    std::lock_guard lock(spooled_mu);
    spooled_paths.clear();
  }
  CurlOutput o = run_curl("-F 'name=J Doe' -F 'small=@" + small + ";type=text/plain' -F 'big=@" +
                          big + "' " + server.url("/parse"));
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, "values name=J+Doe\n"
                   "small file=a.txt type=text/plain size=1000 spooled=no on_disk=0 fnv=" +
                       fnv_of_file(small) +
                       "\nbig file=big.bin type=application/octet-stream size=3145728 spooled=yes "
                       "on_disk=3145728 fnv=" +
                       fnv_of_file(big) + "\n");
  std::lock_guard lock(spooled_mu);
  ASSERT_EQ(spooled_paths.size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(spooled_paths[0])) << "temporary file left behind";
  EXPECT_EQ(spooled_paths[0].rfind(temp_dir() + "/goro-upload-", 0), 0u) << spooled_paths[0];
}

TEST_P(FormsCurl, MultipartLimitsAnswer413Or400) {
  std::string url = server.url("/parse");
  CurlOutput o = run_curl("-w '%{http_code}' -F a=1 -F b=2 -F c=3 -F d=4 -F e=5 " + url);
  EXPECT_EQ(o.out, "413 Content Too Large: multipart: more than max_parts (4) parts\n413");
  o = run_curl("-w '%{http_code}' -F a=" + std::string(17, 'x') + " " + url);
  EXPECT_EQ(o.out, "413 Content Too Large: multipart: field \"a\" is larger than max_field_bytes (16)\n413");
  o = run_curl("-w '%{http_code}' -H 'Content-Type: multipart/form-data' --data-binary x " + url);
  EXPECT_EQ(o.out, "400 Bad Request: multipart: the Content-Type has no boundary parameter\n400");
  o = run_curl("-w '%{http_code}' -H 'Content-Type: multipart/form-data; boundary=\"\"' "
               "--data-binary x " + url);
  EXPECT_NE(o.out.find("400 Bad Request: multipart: invalid boundary"), std::string::npos) << o.out;
  o = run_curl("-w '%{http_code}' -d a=1 " + url);
  EXPECT_NE(o.out.find("415 Unsupported Media Type: multipart: Content-Type "
                       "\"application/x-www-form-urlencoded\" is not multipart/form-data"),
            std::string::npos)
      << o.out;
  std::string huge = temp_dir() + "/huge.bin";
  {
    std::ofstream f(huge, std::ios::binary);
  }
  std::filesystem::resize_file(huge, 65u << 20);
  o = run_curl("-w '%{http_code}' -F 'f=@" + huge + "' " + url);
  EXPECT_EQ(o.out, "413 Content Too Large: multipart: the body is larger than max_body_bytes (67108864)\n413");
  std::filesystem::remove(huge);
  o = run_curl("-w '%{http_code}' -H 'Content-Type: multipart/form-data; boundary=XyZ' "
               "--data-binary $'--XyZ\\r\\nContent-Disposition: form-data; name=a\\r\\n\\r\\nv' " + url);
  EXPECT_EQ(o.out, "400 Bad Request: multipart: the body ends before the closing boundary (truncated)\n400");
}

// A 256 MiB file through the streaming reader: the server's memory grows by a small
// fraction of it, and it takes seconds.
TEST_P(FormsCurl, HugeUploadIsNotHeldInMemory) {
  constexpr std::uint64_t kSize = 256ull << 20;
  std::string path = temp_dir() + "/sparse.bin";
  {
    std::ofstream f(path, std::ios::binary);
  }
  std::filesystem::resize_file(path, kSize);  // sparse: zeros that take no disk
  std::string expect_fnv;
  {
    Fnv1a sum;
    std::string chunk(1 << 20, '\0');
    for (std::uint64_t i = 0; i < kSize >> 20; ++i) sum.update(chunk);
    expect_fnv = hex(sum.hash);
  }
  RssSampler sampler;
  auto start = std::chrono::steady_clock::now();
  CurlOutput o = run_curl("-F 'big=@" + path + "' " + server.url("/stream"));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sampler.stop();
  std::filesystem::remove(path);
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, "big file=sparse.bin size=" + std::to_string(kSize) + " fnv=" + expect_fnv + "\n");
  EXPECT_LT(sampler.growth(), 32u << 20) << "RSS grew " << (sampler.growth() >> 20) << " MiB";
  EXPECT_LT(seconds, 20.0);
  std::printf("256 MiB upload in %.2f s, RSS grew %zu KiB\n", seconds, sampler.growth() >> 10);
}

INSTANTIATE_TEST_SUITE_P(Procs, FormsCurl, ::testing::Values(1, 2, 4, 8),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

TEST(Forms, PartHeaderErrorsThroughTheServer) {
  httptest::RequestBuilder request(
      "POST", "/parse", "--XyZ\r\nContent-Disposition form-data\r\n\r\nv\r\n--XyZ--\r\n");
  request.header("Content-Type", "multipart/form-data; boundary=XyZ");
  httptest::Recorded r = httptest::record(app(), request);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, "400 Bad Request: multipart: malformed part header line \"Content-Disposition form-data\"\n");
}

// Removes the files the tests wrote.
class TempDirCleanup : public ::testing::Environment {
 public:
  void TearDown() override { std::filesystem::remove_all(temp_dir()); }
};
const auto* const cleanup = ::testing::AddGlobalTestEnvironment(new TempDirCleanup);

}  // namespace
}  // namespace goro::http::test
