// goro::grpc::Status — the outcome of a call: a code, a message and optional details,
// as the gRPC protocol carries them in grpc-status, grpc-message and
// grpc-status-details-bin.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace goro::grpc {

// The canonical codes (google.rpc.Code), with their wire values.
enum class StatusCode {
  ok = 0,
  cancelled = 1,
  unknown = 2,
  invalid_argument = 3,
  deadline_exceeded = 4,
  not_found = 5,
  already_exists = 6,
  permission_denied = 7,
  resource_exhausted = 8,
  failed_precondition = 9,
  aborted = 10,
  out_of_range = 11,
  unimplemented = 12,
  internal = 13,
  unavailable = 14,
  data_loss = 15,
  unauthenticated = 16,
};

// "OK", "CANCELLED", ... as the gRPC documents spell them; "CODE" for a value outside
// the table (Status::to_string writes "CODE(n)").
std::string_view status_code_name(StatusCode code) noexcept;

class Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message, std::string details = {})
      : code_(code), message_(std::move(message)), details_(std::move(details)) {}

  bool ok() const noexcept { return code_ == StatusCode::ok; }
  StatusCode code() const noexcept { return code_; }
  // Any text, UTF-8; percent-encoded on the wire and decoded on receipt.
  const std::string& message() const noexcept { return message_; }
  // A serialized google.rpc.Status (grpc-status-details-bin), or empty.
  const std::string& details() const noexcept { return details_; }
  // "NOT_FOUND: no such user" (or "OK").
  std::string to_string() const;

  friend bool operator==(const Status&, const Status&) = default;

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
  std::string details_;
};

}  // namespace goro::grpc
