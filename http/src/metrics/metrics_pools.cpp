// export_pool: a connection pool's figures as gauge and counter families labeled by
// pool, set from one read of the pool at the start of each render.
#include <mutex>
#include <stdexcept>

#include <goro/http/metrics.hpp>

#include "metrics_registry.hpp"

namespace goro::http::metrics {

using detail::Access;
using detail::FamilyState;
using detail::Kind;

// One exported pool: its reader, its children in the six families, and the counters'
// values at the last render (the families' counters only go up by the difference).
struct PoolExport::Source {
  Registry::Impl* registry = nullptr;
  std::uint64_t hook = 0;
  std::pair<std::string, std::string> key;  // (system, pool)
  std::vector<FamilyState*> families;       // open, idle, then the four counters

  // Held while reading and setting, and by the end: a render never touches a child the
  // end has removed.
  std::mutex mu;
  std::function<PoolFigures()> read;  // (mu) empty once ended
  Gauge* open = nullptr;              // (mu)
  Gauge* idle = nullptr;              // (mu)
  Counter* counters[4] = {};          // (mu) connects, connect_errors, waits, discarded
  double last[4] = {};                // (mu)

  void render() {
    std::lock_guard lock(mu);
    if (!read) return;
    const PoolFigures f = read();
    open->set(f.open);
    idle->set(f.idle);
    const double now[4] = {f.connects, f.connect_errors, f.waits, f.discarded};
    for (int i = 0; i < 4; ++i) {
      if (now[i] > last[i]) counters[i]->add(now[i] - last[i]);
      last[i] = now[i];
    }
  }

  void end() {
    {
      std::lock_guard lock(mu);
      if (!read) return;
      read = nullptr;
    }
    {
      std::lock_guard lock(registry->mu);
      registry->before_render.erase(hook);
      registry->pools.erase(key);
    }
    const std::string_view label = key.second;
    const std::span<const std::string_view> values(&label, 1);
    for (std::size_t i = 0; i < families.size(); ++i) {
      FamilyState& f = *families[i];
      std::unique_lock lock(f.mu);
      if (i < 2) {
        if (auto it = f.gauges.find(values); it != f.gauges.end()) f.gauges.erase(it);
      } else {
        if (auto it = f.counters.find(values); it != f.counters.end()) f.counters.erase(it);
      }
    }
  }
};

PoolExport::PoolExport() noexcept = default;
PoolExport::PoolExport(std::shared_ptr<Source> source) noexcept : source_(std::move(source)) {}
PoolExport::PoolExport(PoolExport&&) noexcept = default;
PoolExport& PoolExport::operator=(PoolExport&& other) noexcept {
  if (this != &other) {
    if (source_) source_->end();
    source_ = std::move(other.source_);
  }
  return *this;
}
PoolExport::~PoolExport() {
  if (source_) source_->end();
}

PoolExport export_pool(Registry& registry, std::string_view system, std::string_view pool,
                       std::function<PoolFigures()> read) {
  Registry::Impl& r = Access::impl(registry);
  auto source = std::make_shared<PoolExport::Source>();
  source->registry = &r;
  source->key = {std::string(system), std::string(pool)};
  const std::string prefix = std::string(system) + "_pool_";
  const std::pair<const char*, const char*> gauges[] = {
      {"open_connections", "Connections of the pool open now, idle and in use."},
      {"idle_connections", "Connections of the pool open and idle now."},
  };
  const std::pair<const char*, const char*> counters[] = {
      {"connects_total", "Connections the pool made or tried to make."},
      {"connect_errors_total", "Connections the pool tried to make and could not."},
      {"waits_total", "Calls that waited for a connection of the pool to come free."},
      {"discarded_total", "Connections the pool closed because they were broken."},
  };
  for (const auto& [name, help] : gauges)
    source->families.push_back(r.add(prefix + name, help, Kind::gauge, {"pool"}, {}, nullptr));
  for (const auto& [name, help] : counters)
    source->families.push_back(r.add(prefix + name, help, Kind::counter, {"pool"}, {}, nullptr));
  {
    std::lock_guard lock(r.mu);
    if (!r.pools.insert(source->key).second)
      throw std::invalid_argument("pool \"" + std::string(pool) + "\" of " + std::string(system) +
                                  " is exported already");
  }
  try {
    source->open = &Access::family<Gauge>(source->families[0]).with_labels({pool});
    source->idle = &Access::family<Gauge>(source->families[1]).with_labels({pool});
    for (int i = 0; i < 4; ++i)
      source->counters[i] = &Access::family<Counter>(source->families[2 + i]).with_labels({pool});
  } catch (...) {  // a pool name that is not UTF-8
    std::lock_guard lock(r.mu);
    r.pools.erase(source->key);
    throw;
  }
  source->read = std::move(read);
  {
    std::lock_guard lock(r.mu);
    source->hook = r.next_hook++;
    r.before_render.emplace(source->hook, [s = std::weak_ptr<PoolExport::Source>(source)] {
      if (std::shared_ptr<PoolExport::Source> live = s.lock()) live->render();
    });
  }
  return PoolExport(std::move(source));
}

}  // namespace goro::http::metrics
