// What the form, cookie and CORS tests share: curl as the client, a checksum.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

namespace goro::http::test {

struct CurlOutput {
  int status = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs curl with args (a shell fragment); captures stdout and stderr.
inline CurlOutput run_curl(const std::string& args) {
  char err_file[] = "/tmp/goro-forms-curl-XXXXXX";
  int fd = mkstemp(err_file);
  if (fd >= 0) close(fd);
  std::string cmd = "curl --silent --show-error --max-time 20 " + args + " 2>" + err_file;
  CurlOutput o;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return o;
  char buf[65536];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.out.append(buf, n);
  o.status = pclose(p);
  std::ifstream e(err_file);
  o.err.assign(std::istreambuf_iterator<char>(e), {});
  std::remove(err_file);
  return o;
}

// FNV-1a, 64 bits: a checksum the server computes over what it streamed.
struct Fnv1a {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  void update(std::string_view bytes) {
    for (unsigned char c : bytes) {
      hash ^= c;
      hash *= 0x100000001b3ull;
    }
  }
};

}  // namespace goro::http::test
