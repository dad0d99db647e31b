// Result<T>: a value or a non-OK Status, never both and never an OK status without a value.
// There is no default constructor, so `return {}` cannot silently mean failure.
#pragma once

#include <cassert>
#include <optional>
#include <utility>

#include "common/status.h"

namespace memcoord {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design, like absl::StatusOr
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "Result built from an OK status without a value");
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "Result built from an OK status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace memcoord

#define MEMCOORD_CONCAT_INNER(a, b) a##b
#define MEMCOORD_CONCAT(a, b) MEMCOORD_CONCAT_INNER(a, b)
// MEMCOORD_ASSIGN_OR_RETURN(auto x, MakeX()); returns the error status when MakeX() fails.
#define MEMCOORD_ASSIGN_OR_RETURN(lhs, expr)                     \
  auto MEMCOORD_CONCAT(memcoord_result_, __LINE__) = (expr);     \
  if (!MEMCOORD_CONCAT(memcoord_result_, __LINE__).ok())         \
    return MEMCOORD_CONCAT(memcoord_result_, __LINE__).status(); \
  lhs = std::move(MEMCOORD_CONCAT(memcoord_result_, __LINE__)).value()
