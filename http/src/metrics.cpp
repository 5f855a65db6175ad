#include <goro/http/metrics.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <goro/scheduler/runtime.hpp>

namespace goro::http::metrics {
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

enum class Kind { counter, gauge, histogram };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::counter: return "counter";
    case Kind::gauge: return "gauge";
    case Kind::histogram: return "histogram";
  }
  return "untyped";
}

using Key = std::vector<std::string>;

// Orders keys, and lets a lookup by string_views find a key without building one.
struct KeyLess {
  using is_transparent = void;
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    return std::lexicographical_compare(
        a.begin(), a.end(), b.begin(), b.end(),
        [](std::string_view x, std::string_view y) { return x < y; });
  }
};

template <class Metric>
struct Child {
  std::unique_ptr<Metric> metric;
  std::string labels;  // rendered: name="value",name="value" (empty without labels)
};

template <class Metric>
using Children = std::map<Key, Child<Metric>, KeyLess>;

}  // namespace

namespace detail {

// One metric family: its definition, and its children by label values.
struct FamilyState {
  std::string name;
  std::string help;
  Kind kind = Kind::counter;
  std::vector<std::string> label_names;
  std::vector<double> bounds;          // histograms: upper bounds, +Inf not included
  std::vector<std::string> le_values;  // bounds as rendered, "+Inf" last
  // *_func families: computes the value at render; nullopt leaves the family out.
  std::function<std::optional<double>()> fn;

  // Guards the children maps (not the children, which are atomics). Readers: lookups and
  // render; writers: with_labels() making a child.
  mutable std::shared_mutex mu;
  Children<Counter> counters;
  Children<Gauge> gauges;
  Children<Histogram> histograms;

  template <class Metric>
  Children<Metric>& children() {
    if constexpr (std::is_same_v<Metric, Counter>) {
      return counters;
    } else if constexpr (std::is_same_v<Metric, Gauge>) {
      return gauges;
    } else {
      return histograms;
    }
  }
};

struct Access {
  template <class Metric>
  static std::unique_ptr<Metric> make(const FamilyState& f) {
    if constexpr (std::is_same_v<Metric, Histogram>) {
      return std::unique_ptr<Histogram>(new Histogram(f.bounds));
    } else {
      return std::unique_ptr<Metric>(new Metric());
    }
  }
  template <class Metric>
  static Family<Metric> family(FamilyState* f) {
    return Family<Metric>(f);
  }
  static Registry::Impl& impl(Registry& r) { return *r.impl_; }
  static std::uint64_t whole(const Counter& c) { return c.whole_.load(std::memory_order_relaxed); }
  static double fraction(const Counter& c) { return c.fraction_.load(std::memory_order_relaxed); }
};

}  // namespace detail

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
  // NaN compares false with every bound, so it falls through to +Inf, as in Go.
  const std::size_t i =
      std::isnan(v) ? bounds_.size()
                    : static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                               bounds_.begin());
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

struct Registry::Impl {
  // Guards families and taken. A FamilyState, once made, lives as long as the registry.
  mutable std::mutex mu;
  std::map<std::string, std::unique_ptr<FamilyState>, std::less<>> families;
  // Every name a family writes (its own, and a histogram's _bucket, _sum and _count).
  std::set<std::string, std::less<>> taken;
  // Run at the start of each render, outside mu (under it only to copy the list): a
  // collector that serves several families reads its source once here.
  std::vector<std::function<void()>> before_render;

  FamilyState* add(std::string_view name, std::string_view help, Kind kind,
                   std::vector<std::string> label_names, std::vector<double> bounds,
                   std::function<std::optional<double>()> fn);
};

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
    before = impl_->before_render;
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

namespace {

// The runtime's numbers exist only on a goroutine of the goro::run in progress.
template <class F>
std::function<std::optional<double>()> on_goroutine(F read) {
  return [read]() -> std::optional<double> {
    if (goro::goid() == 0) return std::nullopt;
    return static_cast<double>(read());
  };
}

// One goro::stats() serves every runtime metric of a render: taken before the render
// (off a goroutine of the runtime, nothing is taken and the metrics are left out).
class StatsSnapshot {
 public:
  void take() {
    if (goro::goid() == 0) return;
    goro::RuntimeStats s = goro::stats();
    std::lock_guard lock(mu_);
    stats_ = s;
  }
  goro::RuntimeStats get() {
    std::lock_guard lock(mu_);
    return stats_;
  }

 private:
  std::mutex mu_;  // held for a copy only
  goro::RuntimeStats stats_;
};

}  // namespace

void register_runtime_metrics(Registry& registry) {
  Registry::Impl& r = Access::impl(registry);
  auto add = [&r](std::string_view name, std::string_view help, Kind kind, auto read) {
    r.add(name, help, kind, {}, {}, on_goroutine(read));
  };
  auto snap = std::make_shared<StatsSnapshot>();
  {
    std::lock_guard lock(r.mu);
    r.before_render.push_back([snap] { snap->take(); });
  }
  auto field = [&add, snap](std::string_view name, std::string_view help, Kind kind,
                            auto member) {
    add(name, help, kind, [snap, member] { return snap->get().*member; });
  };
  using S = goro::RuntimeStats;
  field("goro_goroutines", "Goroutines that exist now, the main one included.", Kind::gauge,
        &S::goroutines);
  field("goro_goroutines_running", "Goroutines on a thread now.", Kind::gauge, &S::running);
  field("goro_goroutines_runnable", "Goroutines queued to run.", Kind::gauge, &S::runnable);
  field("goro_goroutines_waiting", "Goroutines parked (channel, lock, sleep, network, ...).",
        Kind::gauge, &S::waiting);
  field("goro_goroutines_syscall", "Goroutines inside goro::blocking.", Kind::gauge,
        &S::syscall);
  field("goro_procs", "Ps (processors) the runtime runs goroutines on: GOMAXPROCS.",
        Kind::gauge, &S::procs);
  field("goro_idle_procs", "Ps with nothing to run.", Kind::gauge, &S::idle_procs);
  field("goro_threads", "OS threads (Ms) the runtime has made, the monitor thread not included.",
        Kind::gauge, &S::threads);
  field("goro_idle_threads", "OS threads parked idle.", Kind::gauge, &S::idle_threads);
  field("goro_spinning_threads", "Threads looking for work.", Kind::gauge,
        &S::spinning_threads);
  field("goro_runqueue_global", "Goroutines in the global run queue.", Kind::gauge,
        &S::global_runqueue);
  field("goro_runqueue_local", "Goroutines in the Ps' own run queues, all Ps.", Kind::gauge,
        &S::local_runqueues);
  field("goro_netpoll_waiters", "Goroutines parked on a socket.", Kind::gauge,
        &S::netpoll_waiters);
  field("goro_handoffs_total",
        "Ps handed to another thread (blocking call retaken, preemption, blocking_long).",
        Kind::counter, &S::handoffs);
  field("goro_preemptions_total", "Ps taken from a goroutine by the preemption signal.",
        Kind::counter, &S::preemptions);
  field("goro_sysmon_wakeups_total", "Times the monitor thread woke up.", Kind::counter,
        &S::sysmon_wakeups);
  field("goro_steals_total", "Successful steals of goroutines from another P's run queue.",
        Kind::counter, &S::steals);
  field("goro_goroutine_runs_total", "Goroutines run by a P (each time one is switched to).",
        Kind::counter, &S::goroutine_runs);
  field("goro_stack_reserved_bytes",
        "Address space mapped for goroutine stacks, those kept for reuse included.",
        Kind::gauge, &S::stack_reserved_bytes);
  field("goro_stack_committed_bytes",
        "Goroutine stack memory resident now (pages touched and not given back).",
        Kind::gauge, &S::stack_committed_bytes);
}

namespace {

// The whole of a small /proc file, read in goro::blocking; nullopt if it cannot be read.
std::optional<std::string> read_proc_file(const char* path) {
  return goro::blocking([path]() -> std::optional<std::string> {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        if (n < 0) return std::nullopt;
        return out;
      }
      out.append(buf, static_cast<std::size_t>(n));
    }
  });
}

// Fields of /proc/self/stat by number, counted from 1 as proc(5) does; nullopt if the
// file cannot be read or is shorter.
template <std::size_t N>
std::optional<std::array<double, N>> stat_fields(const std::array<int, N>& numbers) {
  std::optional<std::string> stat = read_proc_file("/proc/self/stat");
  if (!stat) return std::nullopt;
  // The command name (field 2) is in parentheses and may hold spaces and ')'.
  const std::size_t close = stat->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::array<double, N> out{};
  for (std::size_t i = 0; i < N; ++i) {
    const char* p = stat->c_str() + close + 1;
    for (int field = 3; field < numbers[i]; ++field) {
      while (*p == ' ') ++p;
      while (*p != ' ' && *p != '\0') ++p;
    }
    char* end = nullptr;
    const unsigned long long v = std::strtoull(p, &end, 10);
    if (end == p) return std::nullopt;
    out[i] = static_cast<double>(v);
  }
  return out;
}

std::optional<double> stat_field(int number) {
  auto fields = stat_fields(std::array<int, 1>{number});
  if (!fields) return std::nullopt;
  return (*fields)[0];
}

double clock_ticks() { return static_cast<double>(::sysconf(_SC_CLK_TCK)); }

std::optional<double> cpu_seconds() {
  auto times = stat_fields(std::array<int, 2>{14, 15});  // utime, stime
  if (!times) return std::nullopt;
  return ((*times)[0] + (*times)[1]) / clock_ticks();
}

std::optional<double> start_time_seconds() {
  std::optional<double> since_boot = stat_field(22);
  std::optional<std::string> stat = read_proc_file("/proc/stat");
  if (!since_boot || !stat) return std::nullopt;
  const std::size_t at = stat->find("\nbtime ");
  if (at == std::string::npos) return std::nullopt;
  const double boot = std::strtod(stat->c_str() + at + 7, nullptr);
  return boot + *since_boot / clock_ticks();
}

std::optional<double> open_fds() {
  return goro::blocking([]() -> std::optional<double> {
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr) return std::nullopt;
    const int own = ::dirfd(dir);
    double n = 0;
    while (const dirent* e = ::readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      if (std::atoi(e->d_name) != own) ++n;
    }
    ::closedir(dir);
    return n;
  });
}

}  // namespace

void register_process_metrics(Registry& registry) {
  Registry::Impl& r = Access::impl(registry);
  r.add("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
        Kind::counter, {}, {}, cpu_seconds);
  r.add("process_resident_memory_bytes", "Resident memory size in bytes.", Kind::gauge, {}, {},
        []() -> std::optional<double> {
          std::optional<double> pages = stat_field(24);
          if (!pages) return std::nullopt;
          return *pages * static_cast<double>(::sysconf(_SC_PAGESIZE));
        });
  r.add("process_virtual_memory_bytes", "Virtual memory size in bytes.", Kind::gauge, {}, {},
        [] { return stat_field(23); });
  r.add("process_open_fds", "Number of open file descriptors.", Kind::gauge, {}, {}, open_fds);
  r.add("process_max_fds", "Maximum number of open file descriptors.", Kind::gauge, {}, {},
        []() -> std::optional<double> {
          rlimit limit{};
          if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return std::nullopt;
          if (limit.rlim_cur == RLIM_INFINITY) return std::numeric_limits<double>::infinity();
          return static_cast<double>(limit.rlim_cur);
        });
  r.add("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
        Kind::gauge, {}, {}, start_time_seconds);
}

void register_server_metrics(Registry& registry) {
  Registry::Impl& r = Access::impl(registry);
  auto add = [&r](std::string_view name, std::string_view help, Kind kind, auto member) {
    r.add(name, help, kind, {}, {}, [member]() -> std::optional<double> {
      return static_cast<double>(server_stats().*member);
    });
  };
  add("http_server_connections", "HTTP connections open now.", Kind::gauge,
      &ServerStats::connections_open);
  add("http_server_connections_total", "HTTP connections accepted.", Kind::counter,
      &ServerStats::connections_total);
  add("http_server_received_bytes_total", "Bytes read from HTTP clients, heads and bodies.",
      Kind::counter, &ServerStats::bytes_received);
  add("http_server_sent_bytes_total", "Bytes written to HTTP clients, heads and bodies.",
      Kind::counter, &ServerStats::bytes_sent);
}

}  // namespace goro::http::metrics
