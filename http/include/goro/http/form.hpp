// HTML forms: application/x-www-form-urlencoded values, and multipart/form-data read as a
// stream of parts (Go's mime/multipart.Reader) or parsed whole (Go's ParseMultipartForm).
//
//   void upload(http::Request& req, http::ResponseWriter& w) {
//     http::MultipartForm form;
//     if (!http::parse_multipart_form_or_400(req, w, form)) return;  // 400/413 said why
//     const http::FormFile* f = form.file("photo");                   // in memory or spooled
//   }
//
//   // A body of any size, never held: each part's bytes as they arrive.
//   http::MultipartReader parts(req);
//   while (http::MultipartPart* part = parts.next_part()) {
//     char buf[65536];
//     while (auto n = part->read(buf, sizeof buf)) { if (*n == 0) break; ... }
//   }
//   if (parts.failed()) return http::send_form_error(req, w, parts.error());
//
// Everything here is ordinary code over Request::read and send_error: nothing in the
// server knows about forms. Every limit has a name and a default (FormLimits); a body
// past one is answered 413, a malformed one 400, each with a message naming the limit or
// the problem. The server's own ServerOptions::max_body_bytes applies first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <goro/base/result.hpp>
#include <goro/http/headers.hpp>
#include <goro/http/request.hpp>
#include <goro/http/response.hpp>

namespace goro::http {

// Form values: names to values, a name possibly repeated, in the order received (Go's
// url.Values, with the order kept).
class Values {
 public:
  // The first value of name, or "" when absent (Go's Get).
  std::string_view get(std::string_view name) const noexcept;
  bool has(std::string_view name) const noexcept;
  // Every value of name, in order (Go's v[name]).
  std::vector<std::string_view> all(std::string_view name) const;
  void add(std::string name, std::string value);
  // Replaces every value of name by one.
  void set(std::string_view name, std::string value);
  void remove(std::string_view name);
  // "a=1&a=2&b=x+y", percent-encoded as a form is, sorted by name (as bytes) and each
  // name's values in the order held: Go's url.Values.Encode.
  std::string encode() const;

  const std::vector<std::pair<std::string, std::string>>& entries() const noexcept {
    return entries_;
  }
  std::size_t size() const noexcept { return entries_.size(); }
  bool empty() const noexcept { return entries_.empty(); }

 private:
  std::vector<std::pair<std::string, std::string>> entries_;
};

// Why a form was refused: the status to answer (400 malformed, 408 the body did not
// arrive in time, 413 past a limit, 415 not a form) and a message naming the problem or
// the limit ("multipart: more than max_parts (1000) parts").
struct FormError {
  int status = 0;
  std::string message{};
};

// The limits on reading a form. Defaults follow Go's where it has one.
struct FormLimits {
  // An urlencoded body is read whole into memory up to this size (Go: 10 MB).
  std::uint64_t max_urlencoded_bytes = 10u << 20;
  // A multipart body, all parts with their headers and boundaries. The streaming
  // MultipartReader holds none of it, so raise it freely for uploads to a file or a
  // callback (the server's max_body_bytes must allow as much).
  std::uint64_t max_body_bytes = 32u << 20;
  // Parts in one multipart body (Go: 1000).
  std::size_t max_parts = 1000;
  // The header block of one part, its final empty line included.
  std::size_t max_header_bytes = 16u << 10;
  // One non-file part kept as a form value by parse_multipart_form.
  std::size_t max_field_bytes = 1u << 20;
  // What parse_multipart_form keeps in memory: values, and files as long as they fit;
  // a file that does not fit goes on to a temporary file (Go: 32 MB).
  std::size_t max_memory_bytes = 32u << 20;
  // Where spooled files go; empty: $TMPDIR, else /tmp.
  std::string temp_dir{};
};

// Parses "a=1&b=x+y&a=%C3%A9" into out (appended; '+' is a space, pairs split on '&'; a
// pair without '=' has an empty value; empty pairs are skipped). A pair with a bad
// %-escape is skipped and the first one named in error; the rest are kept. Returns
// whether every pair was valid.
bool parse_urlencoded(std::string_view text, Values& out, FormError* error = nullptr);

// The request's query as Values (bad pairs skipped).
Values query_values(const Request& req);

// Go's ParseForm: an application/x-www-form-urlencoded body's values (read whole, at
// most limits.max_urlencoded_bytes), then the query's, appended to out. A request of
// another Content-Type contributes its query only, its body unread. False with error
// set when the body was too large, cut short, late, or malformed.
bool parse_form(Request& req, Values& out, const FormLimits& limits = {},
                FormError* error = nullptr);

class MultipartReader;

// One part of a multipart body, as MultipartReader::next_part gives it. Valid until the
// next call to next_part or the reader's end.
class MultipartPart {
 public:
  // The part's own header fields ("Content-Disposition", "Content-Type", ...).
  const Headers& header() const noexcept { return header_; }
  // The name parameter of a "form-data" Content-Disposition, else "".
  std::string_view form_name() const noexcept { return form_name_; }
  // The filename parameter, its directories removed ("C:\\x\\a.txt" → "a.txt"); "" when
  // the part is not a file.
  std::string_view filename() const noexcept { return filename_; }
  // Whether Content-Disposition names a filename (a file input, even with no file).
  bool is_file() const noexcept { return is_file_; }
  std::string_view content_type() const noexcept { return header_.get("content-type"); }
  // Reads up to len bytes of the part's content; 0 at its end. Parks while the client
  // sends. On failure the reader's error() says why (errc::malformed_body,
  // errc::body_too_large, a body read's error).
  Result<std::size_t> read(void* buf, std::size_t len);

 private:
  friend class MultipartReader;
  MultipartReader* reader_ = nullptr;
  Headers header_;
  std::string form_name_, filename_;
  bool is_file_ = false;
};

// Reads a multipart body part by part without holding it: at most a read buffer (64 KiB,
// or a part's header block) is in memory at a time. Not for concurrent use.
class MultipartReader {
 public:
  using ReadFn = std::function<Result<std::size_t>(void* buf, std::size_t len)>;

  // Reads req's body, with the boundary of its Content-Type. A request that is not
  // multipart/form-data (or multipart/mixed), or whose boundary is missing or invalid,
  // fails at once: next_part returns nullptr and error() says why (415 or 400).
  explicit MultipartReader(Request& req, FormLimits limits = {});
  // Reads from read (a body, a file, a string) with boundary.
  MultipartReader(ReadFn read, std::string_view boundary, FormLimits limits = {});
  ~MultipartReader();
  MultipartReader(const MultipartReader&) = delete;
  MultipartReader& operator=(const MultipartReader&) = delete;

  // The next part, the rest of the current one skipped; nullptr at the end of the body
  // (after the closing boundary) or on failure (failed()).
  MultipartPart* next_part();
  bool failed() const noexcept { return error_.status != 0; }
  const FormError& error() const noexcept { return error_; }
  // Body bytes read so far.
  std::uint64_t bytes_read() const noexcept { return total_; }

 private:
  friend class MultipartPart;
  Result<std::size_t> read_part(void* buf, std::size_t len);
  std::error_code fill();
  std::error_code fail(int status, std::string message);
  std::error_code read_headers();
  bool ensure(std::size_t n);

  ReadFn read_;
  FormLimits limits_;
  std::string delimiter_;  // "\r\n--" + boundary
  std::string buffer_;
  std::size_t begin_ = 0, end_ = 0;  // the unread bytes in buffer_
  // [begin_, data_end_) is known to be the current part's content; delimiter_found_: the
  // delimiter sits at data_end_.
  std::size_t data_end_ = 0;
  bool delimiter_found_ = false;
  std::uint64_t total_ = 0;
  std::size_t parts_ = 0;
  bool eof_ = false, part_done_ = true, finished_ = false;
  std::unique_ptr<MultipartPart> part_;
  FormError error_;
};

// The boundary parameter of a multipart Content-Type value, checked against RFC 2046
// (1 to 70 characters of its set, not ending in a space). False with error set (415 not
// multipart, 400 boundary missing or invalid).
bool multipart_boundary(std::string_view content_type, std::string& boundary,
                        FormError* error = nullptr);

// A file part of a parsed form: its content in memory, or in a temporary file (path)
// that the MultipartForm holding it removes when it goes.
struct FormFile {
  std::string field;         // the form name
  std::string filename;      // as MultipartPart::filename
  std::string content_type;  // the part's Content-Type, "" when absent
  std::uint64_t size = 0;
  std::string content{};     // the bytes, when path is empty
  std::string path{};        // the spooled file, when content did not fit in memory
};

// Go's multipart.Form: the values and files of a multipart body. Move-only; its
// destructor removes the temporary files (remove_files() does it earlier).
class MultipartForm {
 public:
  MultipartForm() = default;
  MultipartForm(MultipartForm&& other) noexcept;
  MultipartForm& operator=(MultipartForm&& other) noexcept;
  MultipartForm(const MultipartForm&) = delete;
  MultipartForm& operator=(const MultipartForm&) = delete;
  ~MultipartForm();

  Values values;
  std::vector<FormFile> files;

  // The first file of field, or nullptr.
  const FormFile* file(std::string_view field) const noexcept;
  // Removes the spooled files now (their paths are cleared).
  void remove_files() noexcept;
};

// Go's ParseMultipartForm: reads every part of req's multipart body into form (values
// in memory up to max_field_bytes each; files in memory while all held stays under
// max_memory_bytes, else spooled to a temporary file in limits.temp_dir). False with
// error set on a malformed body or a limit passed; files spooled by then are removed.
bool parse_multipart_form(Request& req, MultipartForm& form, const FormLimits& limits = {},
                          FormError* error = nullptr);

// Answers a refused form with send_error (origin "form"): error.status and
// "<status line>: <message>". After a body past the server's max_body_bytes the server
// has answered 413 already and this write fails harmlessly.
std::error_code send_form_error(Request& req, ResponseWriter& w, const FormError& error);

// parse_form / parse_multipart_form, answering a refused form themselves: true with out
// filled, or false after send_form_error. The handler should return on false.
[[nodiscard]] bool parse_form_or_400(Request& req, ResponseWriter& w, Values& out,
                                     const FormLimits& limits = {});
[[nodiscard]] bool parse_multipart_form_or_400(Request& req, ResponseWriter& w,
                                               MultipartForm& form, const FormLimits& limits = {});

}  // namespace goro::http
