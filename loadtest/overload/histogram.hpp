// overload_openloop's latency histogram (openloop.cpp): log-linear buckets, exact
// maxima, percentiles within 0.4%.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace openloop {

using Nanos = std::int64_t;

// Latencies in nanoseconds: exact below 256 ns, then 128 buckets per power of two.
class Histogram {
 public:
  void record(Nanos value) {
    const auto v = static_cast<std::uint64_t>(std::max<Nanos>(value, 0));
    ++counts_[index_of(v)];
    ++total_;
    max_ = std::max(max_, v);
  }
  std::uint64_t total() const { return total_; }
  Nanos max() const { return static_cast<Nanos>(max_); }

  // The smallest value (the top of its bucket, at most the maximum) that at least
  // `quantile` of the samples do not exceed; 0 without samples.
  Nanos percentile(double quantile) const {
    if (total_ == 0) return 0;
    const auto rank = std::max<std::uint64_t>(
        1, static_cast<std::uint64_t>(std::ceil(quantile * static_cast<double>(total_))));
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank) return static_cast<Nanos>(std::min(top_of(i), max_));
    }
    return static_cast<Nanos>(max_);
  }

 private:
  static constexpr unsigned sub_bits = 8;
  static constexpr std::uint64_t sub = std::uint64_t{1} << sub_bits;
  static constexpr std::size_t buckets = sub + (64 - sub_bits) * (sub / 2);

  static std::size_t index_of(std::uint64_t v) {
    if (v < sub) return v;
    const unsigned shift = static_cast<unsigned>(std::bit_width(v)) - sub_bits;
    return sub + (shift - 1) * (sub / 2) + ((v >> shift) - sub / 2);
  }
  static std::uint64_t top_of(std::size_t index) {
    if (index < sub) return index;
    const std::size_t shift = (index - sub) / (sub / 2) + 1;
    const std::uint64_t top = (index - sub) % (sub / 2) + sub / 2;
    return ((top + 1) << shift) - 1;
  }

  std::array<std::uint64_t, buckets> counts_{};
  std::uint64_t total_ = 0;
  std::uint64_t max_ = 0;
};

}  // namespace openloop
