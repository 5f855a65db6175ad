// curl, the command-line client, run from a test: its exit status, stdout and stderr.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace goro::http::test {

struct CurlOutput {
  int status = -1;   // as pclose returns it: 0 when curl succeeded
  std::string out;  // stdout
  std::string err;  // stderr (with -v: the exchange)
};

// Runs curl --silent --show-error --max-time 20 with args (a shell fragment).
inline CurlOutput run_curl(const std::string& args) {
  char err_file[] = "/tmp/goro-http-curl-XXXXXX";
  int fd = mkstemp(err_file);
  if (fd >= 0) close(fd);
  const std::string cmd = "curl --silent --show-error --max-time 20 " + args + " 2>" + err_file;
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

}  // namespace goro::http::test
