// Status: the outcome of a fallible call: a code and a human sentence naming what was wrong and what is
// accepted. Codes follow what the caller should do next and match gRPC's numbering, so they cross an RPC
// unchanged (the one mapping to grpc::Status lives in the coordinator). Success costs one byte and an empty
// string. Thread safety: a const Status may be read from many threads.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace memcoord {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,   // the request is malformed; retrying the same request fails again
  kDeadlineExceeded = 4,  // a timeout expired (a dead peer in a collective, a trim deadline)
  kNotFound = 5,          // an unknown rank, pool, pointer or preset
  kAlreadyExists = 6,     // a second worker claiming a live rank
  kPermissionDenied = 7,
  kResourceExhausted = 8,   // out of memory, over a quota
  kFailedPrecondition = 9,  // the state does not allow it (a limit below current use); fix state first
  kAborted = 10,            // restart the higher-level sequence (an aborted communicator, a stale epoch)
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,  // retry later (coordinator unreachable, no GPU)
  kDataLoss = 15,
  kUnauthenticated = 16,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: size must be positive, got -5"
  std::string ToString() const;

  // Prefixes context ("replay gpt2.trace line 12: ") to the message, keeping the code.
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }

}  // namespace memcoord

// Returns early with the status of `expr` when it is not OK.
#define MEMCOORD_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::memcoord::Status memcoord_status_ = (expr);        \
    if (!memcoord_status_.ok()) return memcoord_status_; \
  } while (false)
