// profile.proto by hand (profile.hpp): a protobuf wire-format writer of a few lines,
// names for addresses from the modules' ELF symbol tables, and zlib's gzip.
//
// Symbols come from each module's .symtab (or .dynsym where the file was stripped),
// read from its file when the first address in it is symbolized: a test's or server's
// own functions are rarely exported, so dladdr alone would not name them. No file and
// line: that would need DWARF, and pprof's -top, -list by function and flame graphs
// work from function names.

#include "profile.hpp"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>
#include <unordered_map>

namespace goro::http::debug::pprof {
namespace {

// The protobuf wire format: varints and length-delimited fields, which is all that
// profile.proto uses (its int64/uint64/bool fields are varints, strings and messages
// length-delimited, repeated numbers packed).
class ProtoWriter {
 public:
  void varint_field(int field, std::uint64_t value) {
    if (value == 0) return;  // proto3: a zero is the default and is not written
    tag(field, 0);
    varint(value);
  }
  void bytes_field(int field, std::string_view bytes) {
    tag(field, 2);
    varint(bytes.size());
    out_.append(bytes);
  }
  // Written even when empty: string_table[0] must be "".
  void string_field(int field, std::string_view s) { bytes_field(field, s); }
  void packed_field(int field, const std::vector<std::uint64_t>& values) {
    if (values.empty()) return;
    ProtoWriter packed;
    for (std::uint64_t v : values) packed.varint(v);
    bytes_field(field, packed.out_);
  }
  const std::string& bytes() const { return out_; }

 private:
  void tag(int field, int wire_type) {
    varint(static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire_type));
  }
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  std::string out_;
};

std::string demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return name;
  std::string s(out);
  std::free(out);
  return s;
}

struct Symbol {
  std::uintptr_t address = 0;  // where it is loaded
  std::uintptr_t size = 0;
  std::string name;  // mangled
};

// A loaded ELF object: the executable, a library, the vDSO.
struct Module {
  std::string path;               // the file; empty when there is none (the vDSO)
  std::string display_name;       // what an unnamed address in it is shown as
  std::uintptr_t bias = 0;        // load address minus link address
  std::uintptr_t exec_start = 0;  // its executable segments, as one range
  std::uintptr_t exec_limit = 0;
  std::uint64_t exec_file_offset = 0;
  bool symbols_read = false;
  std::vector<Symbol> symbols;  // by address
};

constexpr unsigned char kNativeClass = __ELF_NATIVE_CLASS == 64 ? ELFCLASS64 : ELFCLASS32;

// Every function symbol of the ELF file at path, relocated by bias.
std::vector<Symbol> read_function_symbols(const std::string& path, std::uintptr_t bias) {
  std::vector<Symbol> symbols;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return symbols;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(ElfW(Ehdr)))) {
    ::close(fd);
    return symbols;
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return symbols;
  const auto* base = static_cast<const unsigned char*>(map);
  auto in_file = [&](std::uint64_t offset, std::uint64_t length) {
    return offset <= size && length <= size - offset;
  };
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == kNativeClass &&
      eh->e_shentsize == sizeof(ElfW(Shdr)) &&
      in_file(eh->e_shoff, std::uint64_t{eh->e_shnum} * sizeof(ElfW(Shdr)))) {
    const auto* sections = reinterpret_cast<const ElfW(Shdr)*>(base + eh->e_shoff);
    // .symtab names every function; .dynsym only the exported ones (a stripped file).
    const ElfW(Shdr)* table = nullptr;
    for (int kind : {SHT_SYMTAB, SHT_DYNSYM}) {
      for (unsigned i = 0; i < eh->e_shnum && table == nullptr; ++i) {
        if (sections[i].sh_type == static_cast<ElfW(Word)>(kind)) table = &sections[i];
      }
      if (table != nullptr) break;
    }
    if (table != nullptr && table->sh_link < eh->e_shnum &&
        in_file(table->sh_offset, table->sh_size) &&
        in_file(sections[table->sh_link].sh_offset, sections[table->sh_link].sh_size)) {
      const ElfW(Shdr)& strtab = sections[table->sh_link];
      const auto* names = reinterpret_cast<const char*>(base + strtab.sh_offset);
      const auto* syms = reinterpret_cast<const ElfW(Sym)*>(base + table->sh_offset);
      const std::size_t count = table->sh_size / sizeof(ElfW(Sym));
      for (std::size_t i = 0; i < count; ++i) {
        const ElfW(Sym)& s = syms[i];
        const int type = ELF64_ST_TYPE(s.st_info);  // the same as ELF32_ST_TYPE
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF ||
            s.st_value == 0 || s.st_name >= strtab.sh_size) {
          continue;
        }
        const char* name = names + s.st_name;
        if (::strnlen(name, strtab.sh_size - s.st_name) == strtab.sh_size - s.st_name) continue;
        symbols.push_back({bias + s.st_value, s.st_size, name});
      }
    }
  }
  ::munmap(map, size);
  std::sort(symbols.begin(), symbols.end(),
            [](const Symbol& a, const Symbol& b) { return a.address < b.address; });
  return symbols;
}

std::string executable_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// Names for addresses of this process, from the modules loaded when it was made.
class Symbolizer {
 public:
  Symbolizer() {
    ::dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* self) {
          static_cast<Symbolizer*>(self)->add_module(info);
          return 0;
        },
        this);
  }

  std::vector<Module>& modules() { return modules_; }

  // The module whose executable segments hold address, or nullptr.
  Module* module_of(std::uintptr_t address) {
    for (Module& m : modules_) {
      if (address >= m.exec_start && address < m.exec_limit) return &m;
    }
    return nullptr;
  }

  // The function holding address, demangled; "module+0xoffset" when no symbol says.
  std::string function_of(std::uintptr_t address) {
    Module* m = module_of(address);
    if (m == nullptr) {
      char text[32];
      std::snprintf(text, sizeof text, "0x%lx", static_cast<unsigned long>(address));
      return text;
    }
    if (!m->symbols_read) {
      m->symbols_read = true;
      if (!m->path.empty()) m->symbols = read_function_symbols(m->path, m->bias);
    }
    auto it = std::upper_bound(m->symbols.begin(), m->symbols.end(), address,
                               [](std::uintptr_t a, const Symbol& s) { return a < s.address; });
    // The symbols starting nearest below address (aliases share a start): one whose
    // extent holds it, or one without a size (assembly that does not say).
    if (it != m->symbols.begin()) {
      const std::uintptr_t start = std::prev(it)->address;
      do {
        --it;
        if (it->size == 0 || address < it->address + it->size) {
          return demangle(it->name.c_str());
        }
      } while (it != m->symbols.begin() && std::prev(it)->address == start);
    }
    char text[32];
    std::snprintf(text, sizeof text, "+0x%lx", static_cast<unsigned long>(address - m->bias));
    return m->display_name + text;
  }

 private:
  void add_module(const dl_phdr_info* info) {
    Module m;
    m.bias = info->dlpi_addr;
    const bool executable = modules_.empty();  // dl_iterate_phdr gives it first
    const char* name = info->dlpi_name != nullptr ? info->dlpi_name : "";
    if (executable && *name == '\0') {
      m.path = executable_path();
    } else if (*name == '/') {
      m.path = name;
    }
    const std::string_view shown = m.path.empty() ? std::string_view(name) : m.path;
    m.display_name = std::string(shown.substr(shown.rfind('/') + 1));
    if (m.display_name.empty()) m.display_name = "?";
    for (int i = 0; i < info->dlpi_phnum; ++i) {
      const ElfW(Phdr)& ph = info->dlpi_phdr[i];
      if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
      const std::uintptr_t start = info->dlpi_addr + ph.p_vaddr;
      const std::uintptr_t limit = start + ph.p_memsz;
      if (m.exec_limit == 0) {
        m.exec_start = start;
        m.exec_file_offset = ph.p_offset;
      }
      m.exec_start = std::min(m.exec_start, start);
      m.exec_limit = std::max(m.exec_limit, limit);
    }
    if (m.exec_limit != 0) modules_.push_back(std::move(m));
  }

  std::vector<Module> modules_;
};

class StringTable {
 public:
  StringTable() { index(""); }
  std::uint64_t index(const std::string& s) {
    auto [it, added] = ids_.emplace(s, strings_.size());
    if (added) strings_.push_back(s);
    return it->second;
  }
  const std::vector<std::string>& strings() const { return strings_; }

 private:
  std::unordered_map<std::string, std::uint64_t> ids_;
  std::vector<std::string> strings_;
};

std::string value_type(StringTable& strings, const ValueType& v) {
  ProtoWriter w;
  w.varint_field(1, strings.index(v.type));
  w.varint_field(2, strings.index(v.unit));
  return w.bytes();
}

std::string gzip(const std::string& data) {
  z_stream zs{};
  // 16 + 15: a gzip header and trailer around a deflate stream with a 32 KiB window.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return {};
  }
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return rc == Z_STREAM_END ? out : std::string();
}

}  // namespace

std::string encode_pprof(const Profile& profile) {
  // Field numbers are profile.proto's.
  enum : int {
    kSampleType = 1,
    kSample = 2,
    kMapping = 3,
    kLocation = 4,
    kFunction = 5,
    kStringTable = 6,
    kTimeNanos = 9,
    kDurationNanos = 10,
    kPeriodType = 11,
    kPeriod = 12,
  };
  Symbolizer symbols;
  StringTable strings;
  ProtoWriter out;
  for (const ValueType& t : profile.sample_types)
    out.bytes_field(kSampleType, value_type(strings, t));

  std::map<std::uintptr_t, std::uint64_t> location_ids;  // by address
  std::map<std::string, std::uint64_t> pseudo_location_ids;
  std::unordered_map<std::string, std::uint64_t> function_ids;  // by name
  std::vector<std::string> locations, functions;
  auto function_id = [&](const std::string& name) {
    auto [it, added] = function_ids.emplace(name, functions.size() + 1);
    if (added) {
      ProtoWriter f;
      f.varint_field(1, it->second);
      f.varint_field(2, strings.index(name));  // name
      f.varint_field(3, strings.index(name));  // system_name
      functions.push_back(f.bytes());
    }
    return it->second;
  };
  auto add_location = [&](std::uint64_t mapping_id, std::uintptr_t address,
                          const std::string& function) {
    const std::uint64_t id = locations.size() + 1;
    ProtoWriter line;
    line.varint_field(1, function_id(function));
    ProtoWriter l;
    l.varint_field(1, id);
    l.varint_field(2, mapping_id);
    l.varint_field(3, address);
    l.bytes_field(4, line.bytes());
    locations.push_back(l.bytes());
    return id;
  };
  auto location_of = [&](std::uintptr_t address) {
    if (auto it = location_ids.find(address); it != location_ids.end()) return it->second;
    const Module* m = symbols.module_of(address);
    const std::uint64_t mapping_id =
        m == nullptr ? 0 : static_cast<std::uint64_t>(m - symbols.modules().data()) + 1;
    const std::uint64_t id = add_location(mapping_id, address, symbols.function_of(address));
    location_ids.emplace(address, id);
    return id;
  };

  for (const Sample& s : profile.samples) {
    std::vector<std::uint64_t> ids;
    for (std::uintptr_t a : s.addresses) ids.push_back(location_of(a));
    if (ids.empty() && !s.pseudo_frame.empty()) {
      auto [it, added] = pseudo_location_ids.emplace(s.pseudo_frame, 0);
      if (added) it->second = add_location(0, 0, s.pseudo_frame);
      ids.push_back(it->second);
    }
    std::vector<std::uint64_t> values(s.values.begin(), s.values.end());
    ProtoWriter w;
    w.packed_field(1, ids);
    w.packed_field(2, values);
    out.bytes_field(kSample, w.bytes());
  }
  for (std::size_t i = 0; i < symbols.modules().size(); ++i) {
    const Module& m = symbols.modules()[i];
    ProtoWriter w;
    w.varint_field(1, i + 1);
    w.varint_field(2, m.exec_start);
    w.varint_field(3, m.exec_limit);
    w.varint_field(4, m.exec_file_offset);
    w.varint_field(5, strings.index(m.path.empty() ? m.display_name : m.path));
    w.varint_field(7, 1);  // has_functions: pprof need not look for the binary
    out.bytes_field(kMapping, w.bytes());
  }
  for (const std::string& l : locations) out.bytes_field(kLocation, l);
  for (const std::string& f : functions) out.bytes_field(kFunction, f);
  // Every string is indexed by now: the period type's are added just before.
  const std::string period_type = value_type(strings, profile.period_type);
  for (const std::string& s : strings.strings()) out.string_field(kStringTable, s);
  out.varint_field(kTimeNanos, static_cast<std::uint64_t>(profile.time_nanos));
  out.varint_field(kDurationNanos, static_cast<std::uint64_t>(profile.duration_nanos));
  out.bytes_field(kPeriodType, period_type);
  out.varint_field(kPeriod, static_cast<std::uint64_t>(profile.period));
  return gzip(out.bytes());
}

}  // namespace goro::http::debug::pprof
