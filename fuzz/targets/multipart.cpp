// multipart: MultipartReader (http/form.hpp) on a body with boundary "XyZ", with small
// limits. The first byte picks the read sizes (read_steps); the rest is the body. The
// parts, their headers and contents, and the error must be the same as when the body is
// read whole, and no part may hold more bytes than the body.
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <goro/http/form.hpp>

#include "harness.hpp"

namespace goro::fuzz {
namespace {

struct Outcome {
  std::vector<std::string> parts;  // name, filename, headers and content, joined
  int status = 0;
  std::string message;
  std::size_t content_bytes = 0;
};

Outcome read_body(std::string_view body, std::vector<std::size_t> steps) {
  http::FormLimits limits;
  limits.max_parts = 16;
  limits.max_header_bytes = 512;
  limits.max_body_bytes = 1u << 20;
  std::size_t at = 0, call = 0;
  http::MultipartReader reader(
      [&](void* buf, std::size_t len) -> Result<std::size_t> {
        std::size_t n = std::min({len, steps[call++ % steps.size()], body.size() - at});
        std::memcpy(buf, body.data() + at, n);
        at += n;
        return n;
      },
      "XyZ", limits);
  Outcome out;
  while (http::MultipartPart* part = reader.next_part()) {
    std::string p = std::string(part->form_name()) + "|" + std::string(part->filename()) + "|" +
                    (part->is_file() ? "file|" : "field|");
    for (http::HeaderField f : part->header()) {
      p.append(f.name);
      p.append(":");
      p.append(f.value);
      p.append("|");
    }
    char buf[100];
    while (true) {
      Result<std::size_t> n = part->read(buf, std::min<std::size_t>(sizeof buf, 1 + at % 100));
      if (!n || *n == 0) break;
      out.content_bytes += *n;
      p.append(buf, *n);
    }
    out.parts.push_back(std::move(p));
  }
  out.status = reader.error().status;
  out.message = reader.error().message;
  return out;
}

}  // namespace

std::string multipart(std::string_view input) {
  if (input.empty()) return {};
  const auto settings = static_cast<std::uint8_t>(input[0]);
  const std::string_view body = input.substr(1);
  const Outcome whole = read_body(body, {static_cast<std::size_t>(-1)});
  if (whole.content_bytes > body.size()) return "parts hold more bytes than the body";
  if (whole.status != 0 && whole.status != 400 && whole.status != 413)
    return "a refused body with a status other than 400 or 413";
  if (whole.status != 0 && whole.message.empty()) return "a refused body without a message";
  if (whole.parts.size() > 16) return "more parts than max_parts";
  const Outcome pieces = read_body(body, read_steps(settings));
  if (pieces.parts != whole.parts || pieces.status != whole.status ||
      pieces.message != whole.message)
    return "read in pieces, the body gives other parts or another error";
  return {};
}

}  // namespace goro::fuzz
