// watch_files: reloads a TlsContext when the files it was made from change, for the
// certificate managers (certbot, cert-manager's mounted secrets) that replace files
// without telling the process. A poll of stat(2), not inotify: a mounted secret changes
// by swapping a symlink two directories up, which a poll of the path sees without
// knowing how it was done, and one stat per file per interval costs nothing.
#include <sys/stat.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <goro/net/tls.hpp>
#include <goro/scheduler/context.hpp>
#include <goro/scheduler/runtime.hpp>

namespace goro::net {

namespace {

// What a poll compares: (exists, device, inode, size, modification time) per file.
using FileStamp = std::tuple<bool, dev_t, ino_t, off_t, long long>;

std::vector<std::string> files_of(const TlsConfig& config) {
  std::vector<std::string> files;
  for (const TlsCertificate& c : config.certificates) {
    files.push_back(c.cert_file);
    files.push_back(c.key_file);
  }
  if (!config.client_ca_file.empty()) files.push_back(config.client_ca_file);
  if (!config.ca_file.empty()) files.push_back(config.ca_file);
  return files;
}

std::vector<FileStamp> stamps(const std::vector<std::string>& files) {
  return goro::blocking([&] {
    std::vector<FileStamp> out;
    for (const std::string& f : files) {
      struct stat st {};
      if (::stat(f.c_str(), &st) != 0) {
        out.emplace_back(false, 0, 0, 0, 0);
        continue;
      }
      out.emplace_back(true, st.st_dev, st.st_ino, st.st_size,
                       static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL +
                           st.st_mtim.tv_nsec);
    }
    return out;
  });
}

}  // namespace

void watch_files(std::shared_ptr<TlsContext> ctx, std::chrono::nanoseconds interval,
                 Context stop, std::function<void(const goro::Error&)> on_reload) {
  if (!ctx || interval.count() <= 0) return;
  std::weak_ptr<TlsContext> weak = ctx;
  std::vector<std::string> files = files_of(ctx->config());
  ctx.reset();
  // Taken before returning, so that a change made once watch_files has returned is seen.
  std::vector<FileStamp> first = stamps(files);
  goro::go([weak = std::move(weak), files = std::move(files), seen = std::move(first), interval,
            stop = std::move(stop), on_reload = std::move(on_reload)]() mutable {
    while (!goro::sleep(interval, stop)) {
      if (weak.expired()) return;
      std::vector<FileStamp> now = stamps(files);
      if (now == seen) continue;
      // A failed reload is not retried until the files change again: a certificate
      // written before its key reloads when the key lands.
      seen = std::move(now);
      std::shared_ptr<TlsContext> live = weak.lock();
      if (!live) return;
      goro::Error result = live->reload();
      if (on_reload) on_reload(result);
    }
  });
}

}  // namespace goro::net
