// multipart/form-data read as a stream (RFC 7578 over RFC 2046's multipart syntax).
//
// The body is scanned for the delimiter "\r\n--boundary" in one read buffer. A part's
// content is every byte up to the next delimiter; bytes at the buffer's tail that could
// be the start of one are held back until more arrive. The buffer starts with a "\r\n"
// of its own, so that the first boundary, which has no line break before it, is found
// as any other and whatever precedes it (the preamble) is skipped like part content.
#include <goro/http/form.hpp>

#include <algorithm>
#include <cstring>

#include <goro/http/errors.hpp>

#include "forms/body_error.hpp"
#include "forms/media_params.hpp"

namespace goro::http {
namespace {

constexpr std::size_t kReadBuffer = 64u << 10;

// RFC 2046 5.1.1: bchars.
bool boundary_char(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::strchr("'()+_,-./:=? ", c) != nullptr && c != '\0';
}

bool token_char(char c) {
  return c > 32 && c < 127 && std::strchr("()<>@,;:\\\"/[]?={}", c) == nullptr;
}

// The last path element of a client's file name: browsers send a bare name, but old
// ones and hand-made clients may send "C:\dir\a.txt" or "../../a.txt".
std::string base_name(std::string_view name) {
  std::size_t slash = name.find_last_of("/\\");
  if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
  if (name == "." || name == "..") return {};
  return std::string(name);
}

}  // namespace

bool multipart_boundary(std::string_view content_type, std::string& boundary, FormError* error) {
  FormError local;
  FormError& err = error != nullptr ? *error : local;
  detail::MediaType media;
  if (!detail::parse_media_type(content_type, media)) {
    err = {400, "multipart: malformed Content-Type \"" +
                    std::string(content_type.substr(0, 100)) + "\""};
    return false;
  }
  if (media.type != "multipart/form-data" && media.type != "multipart/mixed") {
    err = {415, "multipart: Content-Type \"" + std::string(content_type.substr(0, 100)) +
                    "\" is not multipart/form-data"};
    return false;
  }
  const std::string* value = media.param("boundary");
  if (value == nullptr) {
    err = {400, "multipart: the Content-Type has no boundary parameter"};
    return false;
  }
  if (value->empty() || value->size() > 70 || value->back() == ' ' ||
      !std::all_of(value->begin(), value->end(), boundary_char)) {
    err = {400, "multipart: invalid boundary \"" + value->substr(0, 80) +
                    "\" (RFC 2046: 1 to 70 of its characters, not ending in a space)"};
    return false;
  }
  boundary = *value;
  return true;
}

Result<std::size_t> MultipartPart::read(void* buf, std::size_t len) {
  return reader_->read_part(buf, len);
}

MultipartReader::MultipartReader(Request& req, FormLimits limits) : limits_(std::move(limits)) {
  std::string boundary;
  if (!multipart_boundary(req.header("content-type"), boundary, &error_)) return;
  if (req.content_length() > 0 &&
      static_cast<std::uint64_t>(req.content_length()) > limits_.max_body_bytes) {
    (void)fail(413, "multipart: the body is larger than max_body_bytes (" +
                        std::to_string(limits_.max_body_bytes) + ")");
    return;
  }
  read_ = [&req](void* buf, std::size_t len) { return req.read(buf, len); };
  delimiter_ = "\r\n--" + boundary;
  buffer_.resize(std::max(kReadBuffer, limits_.max_header_bytes + delimiter_.size() + 8));
  buffer_[0] = '\r';
  buffer_[1] = '\n';
  end_ = 2;
  part_done_ = false;
}

MultipartReader::MultipartReader(ReadFn read, std::string_view boundary, FormLimits limits)
    : read_(std::move(read)), limits_(std::move(limits)), delimiter_("\r\n--") {
  delimiter_.append(boundary);
  buffer_.resize(std::max(kReadBuffer, limits_.max_header_bytes + delimiter_.size() + 8));
  buffer_[0] = '\r';
  buffer_[1] = '\n';
  end_ = 2;
  part_done_ = false;
}

MultipartReader::~MultipartReader() = default;

std::error_code MultipartReader::fail(int status, std::string message) {
  if (!failed()) error_ = {status, std::move(message)};
  return make_error_code(error_.status == 413 ? errc::body_too_large : errc::malformed_body);
}

std::error_code MultipartReader::fill() {
  if (eof_) return {};
  if (begin_ > 0 && (end_ == buffer_.size() || begin_ >= buffer_.size() / 2)) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    data_end_ -= std::min(data_end_, begin_);
    begin_ = 0;
  }
  Result<std::size_t> n = read_(buffer_.data() + end_, buffer_.size() - end_);
  if (!n) {
    if (!failed()) error_ = detail::body_read_error(n.error(), "multipart");
    return n.error();
  }
  if (*n == 0) {
    eof_ = true;
    return {};
  }
  end_ += *n;
  total_ += *n;
  if (total_ > limits_.max_body_bytes) {
    return fail(413, "multipart: the body is larger than max_body_bytes (" +
                         std::to_string(limits_.max_body_bytes) + ")");
  }
  return {};
}

bool MultipartReader::ensure(std::size_t n) {
  while (end_ - begin_ < n && !eof_ && !failed()) {
    if (fill()) return false;
  }
  return end_ - begin_ >= n;
}

Result<std::size_t> MultipartReader::read_part(void* buf, std::size_t len) {
  if (failed()) return fail(error_.status, {});
  if (part_done_ || len == 0) return std::size_t{0};
  while (true) {
    if (begin_ < data_end_) {
      std::size_t n = std::min(len, data_end_ - begin_);
      std::memcpy(buf, buffer_.data() + begin_, n);
      begin_ += n;
      return n;
    }
    if (delimiter_found_) {
      part_done_ = true;
      return std::size_t{0};
    }
    std::string_view unread(buffer_.data() + begin_, end_ - begin_);
    std::size_t at = unread.find(delimiter_);
    // As Go does: the delimiter followed by anything but "--", padding or a line end
    // ("\r\n--boundaryX") is content.
    while (at != std::string_view::npos && at + delimiter_.size() < unread.size() &&
           std::strchr("- \t\r\n", unread[at + delimiter_.size()]) == nullptr) {
      at = unread.find(delimiter_, at + 1);
    }
    if (at != std::string_view::npos) {
      data_end_ = begin_ + at;
      // Known to be the delimiter once the byte after it is in (or the body ended).
      delimiter_found_ = at + delimiter_.size() < unread.size() || eof_;
      if (delimiter_found_ || begin_ < data_end_) continue;
    } else {
      // Content, all but a tail that may be the start of a delimiter.
      std::size_t tail = unread.size() > delimiter_.size() ? unread.size() - delimiter_.size() : 0;
      std::size_t cr = unread.find('\r', tail);
      data_end_ = begin_ + (cr == std::string_view::npos ? unread.size() : cr);
      if (begin_ < data_end_) continue;
    }
    if (eof_) return fail(400, "multipart: the body ends before the closing boundary (truncated)");
    if (std::error_code ec = fill()) return ec;
  }
}

MultipartPart* MultipartReader::next_part() {
  if (failed() || finished_ || !read_) return nullptr;
  char sink[8192];
  while (!part_done_) {
    Result<std::size_t> n = read_part(sink, sizeof sink);
    if (!n) return nullptr;
  }
  // At the delimiter: "\r\n--boundary", then "--" for the last, or padding and CRLF.
  if (!ensure(delimiter_.size() + 2)) {
    if (!failed()) (void)fail(400, "multipart: the body ends in a boundary line (truncated)");
    return nullptr;
  }
  begin_ += delimiter_.size();
  if (buffer_[begin_] == '-' && buffer_[begin_ + 1] == '-') {
    begin_ += 2;
    finished_ = true;
    return nullptr;
  }
  while (ensure(1) && (buffer_[begin_] == ' ' || buffer_[begin_] == '\t')) ++begin_;
  if (!ensure(2)) {
    if (!failed()) (void)fail(400, "multipart: the body ends in a boundary line (truncated)");
    return nullptr;
  }
  if (buffer_[begin_] != '\r' || buffer_[begin_ + 1] != '\n') {
    (void)fail(400, "multipart: malformed boundary line (no CRLF after the boundary)");
    return nullptr;
  }
  begin_ += 2;
  if (++parts_ > limits_.max_parts) {
    (void)fail(413, "multipart: more than max_parts (" + std::to_string(limits_.max_parts) +
                        ") parts");
    return nullptr;
  }
  if (!part_) part_ = std::make_unique<MultipartPart>();
  part_->reader_ = this;
  part_->header_.clear();
  part_->form_name_.clear();
  part_->filename_.clear();
  part_->is_file_ = false;
  if (read_headers()) return nullptr;
  part_done_ = false;
  delimiter_found_ = false;
  data_end_ = begin_;
  return part_.get();
}

std::error_code MultipartReader::read_headers() {
  std::string_view block;
  while (true) {
    std::string_view unread(buffer_.data() + begin_, end_ - begin_);
    if (unread.starts_with("\r\n")) {
      begin_ += 2;
      break;
    }
    std::size_t at = unread.find("\r\n\r\n");
    if (at != std::string_view::npos && at + 4 <= limits_.max_header_bytes) {
      block = unread.substr(0, at + 2);
      begin_ += at + 4;
      break;
    }
    if (at != std::string_view::npos || unread.size() >= limits_.max_header_bytes) {
      return fail(413, "multipart: a part's header block is larger than max_header_bytes (" +
                           std::to_string(limits_.max_header_bytes) + ")");
    }
    if (eof_) return fail(400, "multipart: the body ends in a part's headers (truncated)");
    if (std::error_code ec = fill()) return ec;
  }
  // The views into the buffer stay valid: nothing is read until the part's content.
  while (!block.empty()) {
    std::size_t eol = block.find("\r\n");
    std::string_view line = block.substr(0, eol);
    block.remove_prefix(eol + 2);
    std::size_t colon = line.find(':');
    if (colon == 0 || colon == std::string_view::npos ||
        !std::all_of(line.begin(), line.begin() + static_cast<std::ptrdiff_t>(colon), token_char)) {
      return fail(400, "multipart: malformed part header line \"" +
                           std::string(line.substr(0, 80)) + "\"");
    }
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (std::any_of(value.begin(), value.end(),
                    [](char c) { return c == '\0' || c == '\r' || c == '\n'; })) {
      return fail(400, "multipart: a part header value holds a control character");
    }
    part_->header_.add(line.substr(0, colon), value);
  }
  std::string_view disposition = part_->header_.get("content-disposition");
  if (!disposition.empty()) {
    detail::MediaType parsed;
    if (!detail::parse_media_type(disposition, parsed, false)) {
      return fail(400, "multipart: malformed Content-Disposition \"" +
                           std::string(disposition.substr(0, 100)) + "\"");
    }
    if (parsed.type == "form-data") {
      if (const std::string* name = parsed.param("name")) part_->form_name_ = *name;
    }
    if (const std::string* filename = parsed.param("filename")) {
      part_->is_file_ = true;
      part_->filename_ = base_name(*filename);
    }
  }
  return {};
}

}  // namespace goro::http
