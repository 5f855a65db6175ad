// The metrics registry: families, their children, and the text exposition format.
#include <goro/http/metrics.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <utility>

#include "metrics_registry.hpp"

namespace goro::http::metrics {

using detail::Children;
using detail::Key;
using detail::Kind;

namespace {

[[noreturn]] void invalid(std::string what) {
  throw std::invalid_argument("goro::http::metrics: " + std::move(what));
}

bool valid_metric_name(std::string_view s) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool valid_label_name(std::string_view s) {
  if (s.empty() || s.starts_with("__")) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (s.size() - i < static_cast<std::size_t>(len)) return false;
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return false;
    }
    i += len;
  }
  return true;
}

// A double as Go's client writes it (strconv 'g' with the shortest precision): the
// fewest digits that read back as the same double, in exponent form when the exponent
// is below -4 or 6 and above. Bucket bounds are label values that queries match as
// text (le="100000", le="1e+06"), so they must read exactly as Go's do.
void append_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out.append("NaN");
    return;
  }
  if (std::isinf(v)) {
    out.append(v > 0 ? "+Inf" : "-Inf");
    return;
  }
  char buf[64];
  std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  if (r.ec != std::errc()) return;
  const char* digits = std::find(buf, r.ptr, 'e') + 1;  // "e-05", "e+21": sign always there
  int exponent = 0;
  std::from_chars(digits + (*digits == '+' ? 1 : 0), r.ptr, exponent);
  if (exponent < -4 || exponent >= 6) {
    out.append(buf, r.ptr);
    return;
  }
  r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  if (r.ec == std::errc()) out.append(buf, r.ptr);
}

void append_value(std::string& out, std::uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, ec == std::errc() ? end : buf);
}

// HELP text escapes backslash and newline; label values also the double quote.
void append_escaped(std::string& out, std::string_view s, bool quote) {
  for (char c : s) {
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '"' && quote) {
      out.append("\\\"");
    } else {
      out.push_back(c);
    }
  }
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::counter: return "counter";
    case Kind::gauge: return "gauge";
    case Kind::histogram: return "histogram";
  }
  return "untyped";
}

}  // namespace

using detail::Access;
using detail::FamilyState;

void Counter::add(double v) {
  if (!(v >= 0)) invalid("a counter cannot go down (add " + std::to_string(v) + ")");
  double whole = 0;
  const double frac = std::modf(v, &whole);
  if (whole > 0 && whole < 9.0e15) {
    whole_.fetch_add(static_cast<std::uint64_t>(whole), std::memory_order_relaxed);
    if (frac != 0) fraction_.fetch_add(frac, std::memory_order_relaxed);
  } else {
    fraction_.fetch_add(v, std::memory_order_relaxed);
  }
}

double Counter::value() const noexcept {
  return static_cast<double>(whole_.load(std::memory_order_relaxed)) +
         fraction_.load(std::memory_order_relaxed);
}

Histogram::Histogram(std::span<const double> bounds)
    : bounds_(bounds),
      buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds.size() + 1)) {}

void Histogram::observe(double v) noexcept {
  // NaN compares false with every bound, so it falls through to +Inf, as in Go. Most
  // observations land in the first few buckets: a walk from the first finds them in a
  // compare or two, where a binary search takes four for the default eleven.
  std::size_t i = 0;
  const std::size_t n = bounds_.size();
  if (n <= 16) {
    while (i < n && !(v <= bounds_[i])) ++i;
  } else if (std::isnan(v)) {
    i = n;
  } else {
    i = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  }
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

std::uint64_t Histogram::count() const noexcept {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i)
    n += buckets_[i].load(std::memory_order_relaxed);
  return n;
}

std::uint64_t Histogram::bucket_count(std::size_t i) const noexcept {
  return i <= bounds_.size() ? buckets_[i].load(std::memory_order_relaxed) : 0;
}

template <class Metric>
Metric& Family<Metric>::with_labels(std::span<const std::string_view> values) {
  FamilyState& f = *state_;
  if (values.size() != f.label_names.size()) {
    invalid(f.name + " has " + std::to_string(f.label_names.size()) + " labels, given " +
            std::to_string(values.size()) + " values");
  }
  Children<Metric>& children = f.children<Metric>();
  {
    std::shared_lock lock(f.mu);
    auto it = children.find(values);
    if (it != children.end()) return *it->second.metric;
  }
  Key key;
  std::string labels;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!valid_utf8(values[i])) invalid("label value of " + f.label_names[i] + " is not UTF-8");
    key.emplace_back(values[i]);
    if (i > 0) labels.push_back(',');
    labels.append(f.label_names[i]);
    labels.append("=\"");
    append_escaped(labels, values[i], true);
    labels.push_back('"');
  }
  std::unique_lock lock(f.mu);
  auto [it, inserted] = children.try_emplace(std::move(key));
  if (inserted) {
    it->second.metric = Access::make<Metric>(f);
    it->second.labels = std::move(labels);
  }
  return *it->second.metric;
}

template <class Metric>
const std::string& Family<Metric>::name() const noexcept {
  return state_->name;
}

template <class Metric>
const std::vector<std::string>& Family<Metric>::label_names() const noexcept {
  return state_->label_names;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

std::vector<double> default_buckets() { return {.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}; }

std::vector<double> linear_buckets(double start, double width, int count) {
  if (count < 1 || !(width > 0)) invalid("linear_buckets needs count >= 1 and width > 0");
  std::vector<double> out;
  for (int i = 0; i < count; ++i) out.push_back(start + width * i);
  return out;
}

std::vector<double> exponential_buckets(double start, double factor, int count) {
  if (count < 1 || !(start > 0) || !(factor > 1)) {
    invalid("exponential_buckets needs count >= 1, start > 0 and factor > 1");
  }
  std::vector<double> out;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) out.push_back(v);
  return out;
}

FamilyState* Registry::Impl::add(std::string_view name, std::string_view help, Kind kind,
                                 std::vector<std::string> label_names, std::vector<double> bounds,
                                 std::function<std::optional<double>()> fn) {
  const std::string quoted = "\"" + std::string(name) + "\"";
  if (!valid_metric_name(name)) invalid("invalid metric name " + quoted);
  if (!valid_utf8(help)) invalid("the help of " + quoted + " is not UTF-8");
  for (std::size_t i = 0; i < label_names.size(); ++i) {
    const std::string& l = label_names[i];
    if (!valid_label_name(l)) invalid("invalid label name \"" + l + "\" of " + quoted);
    if (kind == Kind::histogram && l == "le")
      invalid("a histogram cannot have the label le: " + quoted);
    if (std::find(label_names.begin(), label_names.begin() + static_cast<std::ptrdiff_t>(i), l) !=
        label_names.begin() + static_cast<std::ptrdiff_t>(i)) {
      invalid("label name \"" + l + "\" repeated in " + quoted);
    }
  }
  std::vector<std::string> le_values;
  if (kind == Kind::histogram) {
    if (!bounds.empty() && std::isinf(bounds.back()) && bounds.back() > 0) bounds.pop_back();
    for (std::size_t i = 0; i < bounds.size(); ++i) {
      if (std::isnan(bounds[i]) || (i > 0 && !(bounds[i - 1] < bounds[i]))) {
        invalid("the buckets of " + quoted + " must ascend strictly, without NaN");
      }
      std::string le;
      append_value(le, bounds[i]);
      le_values.push_back(std::move(le));
    }
    le_values.emplace_back("+Inf");
  }

  std::vector<std::string> series;
  if (kind == Kind::histogram) {
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      series.push_back(std::string(name) + suffix);
  }
  series.emplace_back(name);

  std::lock_guard lock(mu);
  if (auto it = families.find(name); it != families.end()) {
    FamilyState& f = *it->second;
    if (!fn && !f.fn && f.kind == kind && f.help == help && f.label_names == label_names &&
        f.bounds == bounds) {
      return &f;
    }
    invalid(quoted + " is already registered with another definition");
  }
  for (const std::string& s : series) {
    if (taken.contains(s)) invalid(quoted + " clashes with the metric that writes " + s);
  }
  auto state = std::make_unique<FamilyState>();
  state->name = std::string(name);
  state->help = std::string(help);
  state->kind = kind;
  state->label_names = std::move(label_names);
  state->bounds = std::move(bounds);
  state->le_values = std::move(le_values);
  state->fn = std::move(fn);
  FamilyState* f = state.get();
  families.emplace(state->name, std::move(state));
  for (std::string& s : series) taken.insert(std::move(s));
  return f;
}

Registry::Registry() : impl_(std::make_unique<Impl>()) {}
Registry::~Registry() = default;

Counter& Registry::counter(std::string_view name, std::string_view help) {
  return counter_family(name, help, {}).with_labels({});
}

Gauge& Registry::gauge(std::string_view name, std::string_view help) {
  return gauge_family(name, help, {}).with_labels({});
}

Histogram& Registry::histogram(std::string_view name, std::string_view help,
                               std::vector<double> buckets) {
  return histogram_family(name, help, {}, std::move(buckets)).with_labels({});
}

Family<Counter> Registry::counter_family(std::string_view name, std::string_view help,
                                         std::vector<std::string> label_names) {
  return Access::family<Counter>(
      impl_->add(name, help, Kind::counter, std::move(label_names), {}, nullptr));
}

Family<Gauge> Registry::gauge_family(std::string_view name, std::string_view help,
                                     std::vector<std::string> label_names) {
  return Access::family<Gauge>(
      impl_->add(name, help, Kind::gauge, std::move(label_names), {}, nullptr));
}

Family<Histogram> Registry::histogram_family(std::string_view name, std::string_view help,
                                             std::vector<std::string> label_names,
                                             std::vector<double> buckets) {
  return Access::family<Histogram>(
      impl_->add(name, help, Kind::histogram, std::move(label_names), std::move(buckets), nullptr));
}

namespace {

std::function<std::optional<double>()> always(std::function<double()> fn) {
  if (!fn) invalid("a *_func metric needs a function");
  return [fn = std::move(fn)]() -> std::optional<double> { return fn(); };
}

}  // namespace

void Registry::counter_func(std::string_view name, std::string_view help,
                            std::function<double()> fn) {
  impl_->add(name, help, Kind::counter, {}, {}, always(std::move(fn)));
}

void Registry::gauge_func(std::string_view name, std::string_view help,
                          std::function<double()> fn) {
  impl_->add(name, help, Kind::gauge, {}, {}, always(std::move(fn)));
}

namespace {

void append_header(std::string& out, const FamilyState& f) {
  if (!f.help.empty()) {
    out.append("# HELP ");
    out.append(f.name);
    out.push_back(' ');
    append_escaped(out, f.help, false);
    out.push_back('\n');
  }
  out.append("# TYPE ");
  out.append(f.name);
  out.push_back(' ');
  out.append(kind_name(f.kind));
  out.push_back('\n');
}

// name{labels} or name, then a space.
void append_series(std::string& out, const FamilyState& f, std::string_view suffix,
                   std::string_view labels) {
  out.append(f.name);
  out.append(suffix);
  if (!labels.empty()) {
    out.push_back('{');
    out.append(labels);
    out.push_back('}');
  }
  out.push_back(' ');
}

void append_family(std::string& out, FamilyState& f) {
  if (f.fn) {
    std::optional<double> v = f.fn();
    if (!v) return;
    append_header(out, f);
    append_series(out, f, "", "");
    append_value(out, *v);
    out.push_back('\n');
    return;
  }
  std::shared_lock lock(f.mu);
  switch (f.kind) {
    case Kind::counter:
      if (f.counters.empty()) return;
      append_header(out, f);
      for (const auto& [key, child] : f.counters) {
        append_series(out, f, "", child.labels);
        const double fraction = Access::fraction(*child.metric);
        if (fraction == 0) {
          append_value(out, Access::whole(*child.metric));
        } else {
          append_value(out, child.metric->value());
        }
        out.push_back('\n');
      }
      return;
    case Kind::gauge:
      if (f.gauges.empty()) return;
      append_header(out, f);
      for (const auto& [key, child] : f.gauges) {
        append_series(out, f, "", child.labels);
        append_value(out, child.metric->value());
        out.push_back('\n');
      }
      return;
    case Kind::histogram: {
      if (f.histograms.empty()) return;
      append_header(out, f);
      std::string labels;
      for (const auto& [key, child] : f.histograms) {
        const Histogram& h = *child.metric;
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i < f.le_values.size(); ++i) {
          cumulative += h.bucket_count(i);
          labels = child.labels;
          if (!labels.empty()) labels.push_back(',');
          labels.append("le=\"");
          labels.append(f.le_values[i]);
          labels.push_back('"');
          append_series(out, f, "_bucket", labels);
          append_value(out, cumulative);
          out.push_back('\n');
        }
        append_series(out, f, "_sum", child.labels);
        append_value(out, h.sum());
        out.push_back('\n');
        append_series(out, f, "_count", child.labels);
        append_value(out, cumulative);
        out.push_back('\n');
      }
      return;
    }
  }
}

}  // namespace

std::string Registry::render() const {
  std::vector<FamilyState*> families;
  std::vector<std::function<void()>> before;
  {
    std::lock_guard lock(impl_->mu);
    families.reserve(impl_->families.size());
    for (auto& [name, f] : impl_->families) families.push_back(f.get());
    for (const auto& [id, fn] : impl_->before_render) before.push_back(fn);
  }
  for (const auto& fn : before) fn();
  std::string out;
  for (FamilyState* f : families) append_family(out, *f);
  return out;
}

Registry& default_registry() {
  static Registry* registry = [] {
    auto* r = new Registry;  // never destroyed: metrics may be touched during exit
    register_runtime_metrics(*r);
    register_process_metrics(*r);
    register_server_metrics(*r);
    return r;
  }();
  return *registry;
}

}  // namespace goro::http::metrics
