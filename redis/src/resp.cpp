// RESP2 replies: a scan that finds where a complete reply ends (or why the bytes are not
// one), then a build of the Reply from bytes known to be well-formed. The scan allocates
// nothing, so a reply arriving in pieces costs a scan per piece worth looking at, and a
// build once.
#include <goro/redis/resp.hpp>

#include <charconv>
#include <cstring>

namespace goro::redis {

namespace {

using Status = ReplyParser::Status;

// The longest decimal line: "-9223372036854775808".
constexpr std::size_t kMaxNumberLine = 20;

struct Scan {
  const std::string_view in;
  const ReplyLimits& limits;
  std::size_t wait_for = 0;  // need_more: bytes in must hold before a scan can go further
  std::string why;           // bad

  Status bad(std::string w) {
    why = std::move(w);
    return Status::bad;
  }
  Status more(std::size_t at_least) {
    wait_for = at_least;
    return Status::need_more;
  }

  // The line that starts at from (after the type byte): its end (the CR) in *cr.
  Status line(std::size_t from, std::size_t limit, std::size_t* cr) {
    const std::size_t end = std::min(in.size(), from + limit + 2);
    for (std::size_t i = from; i < end; ++i) {
      const char c = in[i];
      if (c == '\n') return bad("a reply line ends in a bare LF");
      if (c != '\r') continue;
      if (i + 1 == in.size()) return more(i + 2);
      if (in[i + 1] != '\n') return bad("a reply line holds a CR not followed by LF");
      *cr = i;
      return Status::done;
    }
    if (end - from > limit) return bad("a reply line is longer than its limit");
    return more(in.size() + 1);
  }

  Status number(std::size_t from, long long* out, std::size_t* next) {
    std::size_t cr = 0;
    if (Status s = line(from, kMaxNumberLine, &cr); s != Status::done) return s;
    const char* first = in.data() + from;
    const char* last = in.data() + cr;
    // from_chars takes a leading '-' and no '+'; it must take every byte of the line.
    if (first == last || (*first == '-' && last - first == 1))
      return bad("a reply's number is empty");
    const auto [ptr, ec] = std::from_chars(first, last, *out);
    if (ec != std::errc() || ptr != last) return bad("a reply's number is not a decimal integer");
    *next = cr + 2;
    return Status::done;
  }

  // The reply that starts at pos, depth arrays deep: its end in *end.
  Status reply(std::size_t pos, std::size_t depth, std::size_t* end) {
    if (pos >= in.size()) return more(pos + 1);
    if (pos > limits.max_bytes) return bad("a reply is larger than its limit");
    const char type = in[pos];
    switch (type) {
      case '+':
      case '-': {
        std::size_t cr = 0;
        if (Status s = line(pos + 1, limits.max_bytes, &cr); s != Status::done) return s;
        *end = cr + 2;
        return Status::done;
      }
      case ':': {
        long long n = 0;
        return number(pos + 1, &n, end);
      }
      case '$': {
        long long n = 0;
        std::size_t body = 0;
        if (Status s = number(pos + 1, &n, &body); s != Status::done) return s;
        if (n == -1) {
          *end = body;
          return Status::done;
        }
        if (n < 0) return bad("a bulk string's length is negative");
        if (static_cast<unsigned long long>(n) > limits.max_bytes)
          return bad("a bulk string is larger than the reply limit");
        const std::size_t stop = body + static_cast<std::size_t>(n) + 2;
        if (in.size() < stop) return more(stop);
        if (in[stop - 2] != '\r' || in[stop - 1] != '\n')
          return bad("a bulk string is not followed by CRLF");
        *end = stop;
        return Status::done;
      }
      case '*': {
        long long n = 0;
        std::size_t next = 0;
        if (Status s = number(pos + 1, &n, &next); s != Status::done) return s;
        if (n == -1) {
          *end = next;
          return Status::done;
        }
        if (n < 0) return bad("an array's length is negative");
        if (static_cast<unsigned long long>(n) > limits.max_elements)
          return bad("an array has more elements than its limit");
        if (n > 0 && depth + 1 > limits.max_depth) return bad("arrays are nested deeper than the limit");
        for (long long i = 0; i < n; ++i) {
          if (Status s = reply(next, depth + 1, &next); s != Status::done) return s;
        }
        *end = next;
        return Status::done;
      }
      default: return bad("a reply starts with an unknown type byte");
    }
  }
};

// Builds the reply at pos of bytes a Scan accepted; returns where it ends.
std::size_t build(std::string_view in, std::size_t pos, Reply& out) {
  const char type = in[pos];
  const std::size_t cr = in.find('\r', pos + 1);
  const std::string_view line = in.substr(pos + 1, cr - pos - 1);
  long long n = 0;
  if (type != '+' && type != '-') std::from_chars(line.data(), line.data() + line.size(), n);
  std::size_t next = cr + 2;
  switch (type) {
    case '+': out = Reply::of_status(std::string(line)); break;
    case '-': out = Reply::of_error(std::string(line)); break;
    case ':': out = Reply::of_integer(n); break;
    case '$':
      if (n < 0) {
        out = Reply::nil();
      } else {
        out = Reply::of_string(std::string(in.substr(next, static_cast<std::size_t>(n))));
        next += static_cast<std::size_t>(n) + 2;
      }
      break;
    default:  // '*'
      if (n < 0) {
        out = Reply::nil();
      } else {
        std::vector<Reply> elements(static_cast<std::size_t>(n));
        for (Reply& e : elements) next = build(in, next, e);
        out = Reply::of_array(std::move(elements));
      }
      break;
  }
  return next;
}

void append_decimal(std::string& out, std::size_t n) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, r.ptr);
}

}  // namespace

ReplyParser::Parsed ReplyParser::parse(std::string_view in) {
  Parsed p;
  if (in.size() < wait_for_) return p;
  Scan scan{in, limits_};
  std::size_t end = 0;
  p.status = scan.reply(0, 0, &end);
  if (p.status == Status::need_more) {
    wait_for_ = scan.wait_for;
    // A reply still short of its limit may be waiting; one past it is refused now.
    if (wait_for_ > limits_.max_bytes + 1) {
      p.status = Status::bad;
      p.why = "a reply is larger than its limit";
    }
    return p;
  }
  wait_for_ = 0;
  if (p.status == Status::bad) {
    p.why = std::move(scan.why);
    return p;
  }
  if (end > limits_.max_bytes) {
    p.status = Status::bad;
    p.why = "a reply is larger than its limit";
    return p;
  }
  p.used = build(in, 0, p.reply);
  return p;
}

void append_command(std::string& out, std::span<const std::string_view> words) {
  out += '*';
  append_decimal(out, words.size());
  out += "\r\n";
  for (std::string_view w : words) {
    out += '$';
    append_decimal(out, w.size());
    out += "\r\n";
    out.append(w);
    out += "\r\n";
  }
}

void append_command(std::string& out, std::initializer_list<std::string_view> words) {
  append_command(out, std::span<const std::string_view>(words.begin(), words.size()));
}

}  // namespace goro::redis
