// Status and the names of its codes.
#include <goro/grpc/status.hpp>

#include <array>

namespace goro::grpc {

std::string_view status_code_name(StatusCode code) noexcept {
  static constexpr std::array<std::string_view, 17> kNames{"OK",
                                                           "CANCELLED",
                                                           "UNKNOWN",
                                                           "INVALID_ARGUMENT",
                                                           "DEADLINE_EXCEEDED",
                                                           "NOT_FOUND",
                                                           "ALREADY_EXISTS",
                                                           "PERMISSION_DENIED",
                                                           "RESOURCE_EXHAUSTED",
                                                           "FAILED_PRECONDITION",
                                                           "ABORTED",
                                                           "OUT_OF_RANGE",
                                                           "UNIMPLEMENTED",
                                                           "INTERNAL",
                                                           "UNAVAILABLE",
                                                           "DATA_LOSS",
                                                           "UNAUTHENTICATED"};
  const auto i = static_cast<std::size_t>(code);
  if (i < kNames.size()) return kNames[i];
  return "CODE";
}

std::string Status::to_string() const {
  std::string out(status_code_name(code_));
  if (out == "CODE") out = "CODE(" + std::to_string(static_cast<int>(code_)) + ")";
  if (!message_.empty()) out += ": " + message_;
  return out;
}

}  // namespace goro::grpc
