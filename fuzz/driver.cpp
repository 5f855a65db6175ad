// libFuzzer's entry point for the target named by GORO_FUZZ_ENTRY (fuzz/CMakeLists.txt):
// a property the target reports broken aborts, which libFuzzer records as a crash.
#include <cstdio>
#include <cstdlib>

#include "harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string failure =
      GORO_FUZZ_ENTRY(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!failure.empty()) {
    std::fprintf(stderr, "fuzz property broken: %s\n", failure.c_str());
    std::abort();
  }
  return 0;
}
