// pprof profiles for /debug/goro/pprof/ (debug.hpp): stacks of program counters,
// symbolized in this process and written as github.com/google/pprof's profile.proto,
// gzip-compressed, which `go tool pprof` reads without the binary.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace goro::http::debug::pprof {

struct ValueType {
  std::string type;  // "samples", "cpu", "goroutine"
  std::string unit;  // "count", "nanoseconds"
};

struct Sample {
  // The stack, innermost first. Each address is the one to symbolize: the interrupted
  // instruction for a CPU sample's innermost frame, a return address minus one for every
  // caller (so that a call that ends a function is not put in the next one).
  std::vector<std::uintptr_t> addresses;
  // One per sample type.
  std::vector<std::int64_t> values;
  // A sample without addresses shows this as its only frame ("lost samples").
  std::string pseudo_frame{};
};

struct Profile {
  std::vector<ValueType> sample_types;
  ValueType period_type;
  std::int64_t period = 0;
  std::int64_t time_nanos = 0;      // when it began, since the Unix epoch
  std::int64_t duration_nanos = 0;  // how long it covers
  std::vector<Sample> samples;
};

// The profile as gzip-compressed profile.proto. Reads the symbol tables of the modules
// the addresses fall in (the executable's and libraries' ELF files): call it off the P,
// in goro::blocking.
std::string encode_pprof(const Profile& profile);

// Every goroutine's stack, as Go's goroutine profile (goroutine/count): a parked one's
// as goro::debug::goroutines() reads it, the others (running, queued, in a blocking
// call: their stacks cannot be read without stopping them) counted under their state.
// Blocks while it reads stacks: call it in goro::blocking (goroutine_profile.cpp).
Profile goroutine_profile();

// CPU profiling (cpu_profile.cpp).

struct CpuProfileResult {
  Profile profile;
  // Why no profile was taken; empty on success. busy: another profile is being taken.
  std::string error{};
  bool busy = false;
};

// Samples the CPU of the whole process at 100 Hz for `window` and returns the stacks
// seen, with sample types samples/count and cpu/nanoseconds as Go writes them. Parks
// the calling goroutine for the window. One profile at a time in the process: a second
// caller gets busy at once.
CpuProfileResult profile_cpu(std::chrono::nanoseconds window);

}  // namespace goro::http::debug::pprof
