// The goroutine profile (profile.hpp) from goro::debug's list of goroutines.

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <goro/scheduler/debug.hpp>

#include "profile.hpp"

namespace goro::http::debug::pprof {

Profile goroutine_profile() {
  const auto now = std::chrono::system_clock::now();
  // Goroutines with the same stack (or, unread, the same state) are one sample.
  std::map<std::pair<std::vector<std::uintptr_t>, std::string>, std::int64_t> counts;
  for (const goro::debug::Goroutine& g : goro::debug::goroutines()) {
    // The dump's pcs are already those to symbolize (a return address minus one).
    std::string unread;
    if (g.pcs.empty()) {
      // pprof drops what is in parentheses, taking it for a C++ argument list.
      unread = g.state + ": stack not read";
      std::replace(unread.begin(), unread.end(), '(', '[');
      std::replace(unread.begin(), unread.end(), ')', ']');
    }
    ++counts[{g.pcs, std::move(unread)}];
  }
  Profile p;
  p.sample_types = {{"goroutine", "count"}};
  p.period_type = {"goroutine", "count"};
  p.period = 1;
  p.time_nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  for (auto& [key, count] : counts) {
    p.samples.push_back({key.first, {count}, key.second});
  }
  return p;
}

}  // namespace goro::http::debug::pprof
