// parse_multipart_form: a whole multipart body into values and files, big files spooled
// to temporary files.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <goro/http/form.hpp>
#include <goro/scheduler/runtime.hpp>

namespace goro::http {
namespace {

// A temporary file being written; removed on destruction unless kept.
struct SpoolFile {
  int fd = -1;
  std::string path;
  bool kept = false;

  SpoolFile() = default;
  SpoolFile(const SpoolFile&) = delete;
  SpoolFile& operator=(const SpoolFile&) = delete;
  ~SpoolFile() {
    if (fd >= 0) goro::blocking([fd = fd] { ::close(fd); });
    if (!kept && !path.empty()) ::unlink(path.c_str());
  }

  // Creates the file in dir ($TMPDIR or /tmp when empty); the error's errno on failure.
  int create(const std::string& dir) {
    std::string where = dir;
    if (where.empty()) {
      const char* env = std::getenv("TMPDIR");
      where = env != nullptr && *env != '\0' ? env : "/tmp";
    }
    path = where + "/goro-upload-XXXXXX";
    int err = 0;
    fd = goro::blocking([&] {
      int made = ::mkostemp(path.data(), O_CLOEXEC);
      err = errno;
      return made;
    });
    if (fd < 0) path.clear();
    return fd < 0 ? err : 0;
  }

  int write_all(const char* data, std::size_t len) {
    return goro::blocking([&] {
      while (len > 0) {
        ssize_t n = ::write(fd, data, len);
        if (n < 0) {
          if (errno == EINTR) continue;
          return errno;
        }
        data += n;
        len -= static_cast<std::size_t>(n);
      }
      return 0;
    });
  }
};

}  // namespace

MultipartForm::MultipartForm(MultipartForm&& other) noexcept
    : values(std::move(other.values)), files(std::move(other.files)) {
  other.files.clear();
}

MultipartForm& MultipartForm::operator=(MultipartForm&& other) noexcept {
  if (this != &other) {
    remove_files();
    values = std::move(other.values);
    files = std::move(other.files);
    other.files.clear();
  }
  return *this;
}

MultipartForm::~MultipartForm() { remove_files(); }

const FormFile* MultipartForm::file(std::string_view field) const noexcept {
  for (const FormFile& f : files) {
    if (f.field == field) return &f;
  }
  return nullptr;
}

void MultipartForm::remove_files() noexcept {
  for (FormFile& f : files) {
    if (!f.path.empty()) ::unlink(f.path.c_str());
    f.path.clear();
  }
}

bool parse_multipart_form(Request& req, MultipartForm& form, const FormLimits& limits,
                          FormError* error) {
  FormError local;
  FormError& err = error != nullptr ? *error : local;
  MultipartReader reader(req, limits);
  std::size_t held = 0;  // bytes of values and in-memory files
  std::string buf(64u << 10, '\0');
  auto failed = [&](FormError e) {
    form.remove_files();
    err = std::move(e);
    return false;
  };
  while (MultipartPart* part = reader.next_part()) {
    if (!part->is_file()) {
      std::string value;
      while (true) {
        Result<std::size_t> n = part->read(buf.data(), buf.size());
        if (!n || *n == 0) break;
        if (value.size() + *n > limits.max_field_bytes) {
          return failed({413, "multipart: field \"" + std::string(part->form_name()) +
                                  "\" is larger than max_field_bytes (" +
                                  std::to_string(limits.max_field_bytes) + ")"});
        }
        held += *n;
        if (held > limits.max_memory_bytes) {
          return failed({413, "multipart: form values are larger than max_memory_bytes (" +
                                  std::to_string(limits.max_memory_bytes) + ")"});
        }
        value.append(buf.data(), *n);
      }
      if (reader.failed()) break;
      if (!part->form_name().empty()) form.values.add(std::string(part->form_name()), std::move(value));
      continue;
    }
    FormFile file;
    file.field = part->form_name();
    file.filename = part->filename();
    file.content_type = part->content_type();
    SpoolFile spool;
    while (true) {
      Result<std::size_t> n = part->read(buf.data(), buf.size());
      if (!n || *n == 0) break;
      file.size += *n;
      if (spool.fd < 0 && held + file.content.size() + *n <= limits.max_memory_bytes) {
        file.content.append(buf.data(), *n);
        continue;
      }
      int e = 0;
      if (spool.fd < 0) {
        e = spool.create(limits.temp_dir);
        if (e == 0) e = spool.write_all(file.content.data(), file.content.size());
        std::string().swap(file.content);
      }
      if (e == 0) e = spool.write_all(buf.data(), *n);
      if (e != 0) {
        return failed({500, "multipart: writing an uploaded file to " +
                                (spool.path.empty() ? std::string("a temporary file") : spool.path) +
                                " failed: " + std::strerror(e)});
      }
    }
    if (reader.failed()) break;
    if (file.field.empty()) continue;
    if (spool.fd >= 0) {
      file.path = spool.path;
      spool.kept = true;
    } else {
      held += file.content.size();
    }
    form.files.push_back(std::move(file));
  }
  if (reader.failed()) return failed(reader.error());
  return true;
}

bool parse_multipart_form_or_400(Request& req, ResponseWriter& w, MultipartForm& form,
                                 const FormLimits& limits) {
  FormError error;
  if (parse_multipart_form(req, form, limits, &error)) return true;
  (void)send_form_error(req, w, error);
  return false;
}

}  // namespace goro::http
