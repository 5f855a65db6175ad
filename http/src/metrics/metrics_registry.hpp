// The metrics registry's state: its families and their children, shared by the
// registry (metrics.cpp) and its collectors (metrics_collectors.cpp).
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <type_traits>
#include <string>
#include <string_view>
#include <vector>

#include <goro/http/metrics.hpp>

namespace goro::http::metrics {
namespace detail {

enum class Kind { counter, gauge, histogram };

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

struct Registry::Impl {
  // Guards families and taken. A FamilyState, once made, lives as long as the registry.
  mutable std::mutex mu;
  std::map<std::string, std::unique_ptr<detail::FamilyState>, std::less<>> families;
  // Every name a family writes (its own, and a histogram's _bucket, _sum and _count).
  std::set<std::string, std::less<>> taken;
  // Run at the start of each render, outside mu (under it only to copy the list): a
  // collector that serves several families reads its source once here. By an id, so
  // that a collector that ends (PoolExport) can leave.
  std::map<std::uint64_t, std::function<void()>> before_render;
  std::uint64_t next_hook = 0;
  // The (system, pool) pairs export_pool() serves now, each at most once.
  std::set<std::pair<std::string, std::string>> pools;

  detail::FamilyState* add(std::string_view name, std::string_view help, detail::Kind kind,
                   std::vector<std::string> label_names, std::vector<double> bounds,
                   std::function<std::optional<double>()> fn);
};

}  // namespace goro::http::metrics
