#include "collectives/communicator.h"

#include <fmt/format.h>

#include <climits>
#include <cstdint>
#include <utility>

namespace memcoord {
namespace {

constexpr const char* kOperationNames[] = {"none",      "allreduce",      "broadcast",
                                           "allgather", "reduce_scatter", "barrier"};

constexpr std::string_view kSignatureNames[] = {"operation", "count", "data type", "reduce op", "root"};

std::string SignatureValue(int field, long long value) {
  switch (field) {
    case 0:
      return value >= 0 && value <= 5 ? kOperationNames[value] : std::to_string(value);
    case 2:
      return std::string(DataTypeName(static_cast<DataType>(value)));
    case 3:
      return std::string(ReduceOpName(static_cast<ReduceOp>(value)));
    default:
      return std::to_string(value);
  }
}

// The bytes of `count` elements of `type`, times `ranks` (allgather's recv, reduce_scatter's send), or
// INVALID_ARGUMENT when that passes what a buffer can span (PTRDIFF_MAX): it used to wrap, and the overlap
// checks then compared the wrong spans.
Result<std::size_t> SpanBytes(const std::string& what, std::size_t count, DataType type, int ranks) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, SizeOf(type), &bytes) ||
      __builtin_mul_overflow(bytes, static_cast<std::size_t>(ranks), &bytes) ||
      bytes > static_cast<std::size_t>(PTRDIFF_MAX)) {
    return InvalidArgument(what +
                           ": the buffers would span more bytes than memory can (count times element "
                           "size" +
                           (ranks > 1 ? std::string(" times ranks") : std::string()) +
                           " passes PTRDIFF_MAX)");
  }
  return bytes;
}

bool Overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return a_bytes != 0 && b_bytes != 0 && x < y + b_bytes && y < x + a_bytes;
}

}  // namespace

Status AbortState::status() const {
  if (!aborted()) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  return Aborted("communicator is aborted: " + reason_);
}

bool AbortState::abort(std::string reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_.load(std::memory_order_relaxed)) return false;
  reason_ = std::move(reason);
  aborted_.store(true, std::memory_order_release);
  return true;
}

Result<bool> PendingCollective::poll() {
  if (done_) {
    if (final_status_.ok()) return true;
    return final_status_;
  }
  Result<bool> r = do_poll();
  if (!r.ok()) {
    done_ = true;
    final_status_ = r.status();
    return r;
  }
  if (*r) done_ = true;
  return r;
}

Status PendingCollective::wait() {
  if (done_) return final_status_;
  final_status_ = do_wait();
  done_ = true;
  return final_status_;
}

Communicator::Communicator(int rank, int size, CommunicatorOptions options)
    : rank_(rank), size_(size), options_(options), abort_state_(std::make_shared<AbortState>()) {}

Status Communicator::order_after(CommStream /*producer*/) { return abort_state_->status(); }

std::string Communicator::Describe(std::string_view operation, std::size_t count, DataType type,
                                   const ReduceOp* op) {
  if (op != nullptr) {
    return fmt::format("{}({}, {} x {})", operation, ReduceOpName(*op), count, DataTypeName(type));
  }
  return fmt::format("{}({} x {})", operation, count, DataTypeName(type));
}

Status Communicator::TimedOut(std::string_view operation) {
  std::string message = fmt::format(
      "{} on a {} communicator of {} ranks (this is rank {}) did not complete within {} ms: one of the {} "
      "peers died or stopped calling collectives; the communicator is now aborted",
      operation, backend(), size_, rank_, options_.timeout.count(), size_ - 1);
  if (abort_state_->abort("an earlier " + std::string(operation) + " timed out")) do_abort();
  return DeadlineExceeded(std::move(message));
}

Status Communicator::Agree(std::string_view what, const long long* values, const std::string_view* names,
                           int count, std::string (*describe)(int field, long long value)) {
  long long words[2 * kMaxAgreementFields];
  for (int i = 0; i < count; ++i) {
    // {v, -v}: one MAX allreduce gives the maximum and (negated) the minimum. -LLONG_MIN would overflow;
    // clamping it to -LLONG_MAX only merges two values no caller uses.
    const long long v = values[i] == LLONG_MIN ? -LLONG_MAX : values[i];
    words[i] = v;
    words[count + i] = -v;
  }
  MEMCOORD_RETURN_IF_ERROR(do_max_allreduce_words(words, 2 * count, what));
  for (int i = 0; i < count; ++i) {
    const long long max = words[i];
    const long long min = -words[count + i];
    if (max != min) {
      return InvalidArgument(
          fmt::format("{}: ranks disagree on the {} (between {} and {} across the {} ranks)", what, names[i],
                      describe(i, min), describe(i, max), size_));
    }
  }
  return Status::Ok();
}

Status Communicator::check_agreement(std::string_view what, std::span<const std::int64_t> values,
                                     std::span<const std::string_view> names) {
  MEMCOORD_RETURN_IF_ERROR(abort_state_->status());
  if (values.size() != names.size() || values.size() > kMaxAgreementFields) {
    return InvalidArgument(fmt::format("check_agreement({}): {} values and {} names; at most {} named values",
                                       what, values.size(), names.size(), kMaxAgreementFields));
  }
  long long words[kMaxAgreementFields];
  for (std::size_t i = 0; i < values.size(); ++i) words[i] = values[i];
  return Agree(what, words, names.data(), static_cast<int>(values.size()),
               [](int, long long value) { return std::to_string(value); });
}

Status Communicator::Verify(const Signature& signature) {
  if (!options_.verify_arguments) return Status::Ok();
  const long long operation = signature.fields[0];
  const std::string what = fmt::format("argument check before {}", SignatureValue(0, operation));
  Status agreed = Agree(what, signature.fields, kSignatureNames, kSignatureFields, SignatureValue);
  if (agreed.code() != StatusCode::kInvalidArgument) return agreed;
  return InvalidArgument(agreed.message() +
                         "; every rank must call the same collective with the same count, type, op and root");
}

Status Communicator::allreduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op) {
  MEMCOORD_ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> pending,
                            start_allreduce(send, recv, count, type, op));
  return pending->wait();
}

Result<std::unique_ptr<PendingCollective>> Communicator::start_allreduce(const void* send, void* recv,
                                                                         std::size_t count, DataType type,
                                                                         ReduceOp op) {
  return StartAllreduce(send, recv, count, type, op, /*verify=*/true);
}

Result<std::unique_ptr<PendingCollective>> Communicator::start_allreduce_checked_once(
    const void* send, void* recv, std::size_t count, DataType type, ReduceOp op) {
  return StartAllreduce(send, recv, count, type, op, /*verify=*/false);
}

Result<std::unique_ptr<PendingCollective>> Communicator::StartAllreduce(const void* send, void* recv,
                                                                        std::size_t count, DataType type,
                                                                        ReduceOp op, bool verify) {
  MEMCOORD_RETURN_IF_ERROR(abort_state_->status());
  if (!IsValid(type)) return InvalidArgument(fmt::format("allreduce: unknown data type {}", int(type)));
  if (!IsValid(op)) return InvalidArgument(fmt::format("allreduce: unknown reduce op {}", int(op)));
  const std::string what = Describe("allreduce", count, type, &op);
  if (count > 0 && (send == nullptr || recv == nullptr)) {
    return InvalidArgument(what + ": " + (send == nullptr ? "send" : "recv") + " buffer is null");
  }
  MEMCOORD_ASSIGN_OR_RETURN(const std::size_t bytes, SpanBytes(what, count, type, 1));
  if (send != recv && Overlap(send, bytes, recv, bytes)) {
    return InvalidArgument(what + ": send and recv overlap without being the same buffer (in place)");
  }
  if (verify) MEMCOORD_RETURN_IF_ERROR(Verify({{1, static_cast<long long>(count), int(type), int(op), 0}}));
  return do_start_allreduce(send, recv, count, type, op);
}

Status Communicator::broadcast(void* buffer, std::size_t count, DataType type, int root) {
  MEMCOORD_RETURN_IF_ERROR(abort_state_->status());
  if (!IsValid(type)) return InvalidArgument(fmt::format("broadcast: unknown data type {}", int(type)));
  const std::string what = Describe("broadcast", count, type);
  if (count > 0 && buffer == nullptr) return InvalidArgument(what + ": buffer is null");
  MEMCOORD_RETURN_IF_ERROR(SpanBytes(what, count, type, 1).status());
  if (root < 0 || root >= size_) {
    return InvalidArgument(
        fmt::format("{}: root {} is not a rank of this {}-rank communicator", what, root, size_));
  }
  MEMCOORD_RETURN_IF_ERROR(Verify({{2, static_cast<long long>(count), int(type), 0, root}}));
  return do_broadcast(buffer, count, type, root);
}

Status Communicator::allgather(const void* send, void* recv, std::size_t count, DataType type) {
  MEMCOORD_RETURN_IF_ERROR(abort_state_->status());
  if (!IsValid(type)) return InvalidArgument(fmt::format("allgather: unknown data type {}", int(type)));
  const std::string what = Describe("allgather", count, type);
  if (count > 0 && (send == nullptr || recv == nullptr)) {
    return InvalidArgument(what + ": " + (send == nullptr ? "send" : "recv") + " buffer is null");
  }
  MEMCOORD_RETURN_IF_ERROR(SpanBytes(what, count, type, size_).status());
  const std::size_t bytes = count * SizeOf(type);
  const auto* in_place = static_cast<const char*>(recv) + static_cast<std::size_t>(rank_) * bytes;
  if (count > 0 && send != in_place && Overlap(send, bytes, recv, bytes * static_cast<std::size_t>(size_))) {
    return InvalidArgument(what + ": send overlaps recv; in place means send == recv + rank * count");
  }
  MEMCOORD_RETURN_IF_ERROR(Verify({{3, static_cast<long long>(count), int(type), 0, 0}}));
  return do_allgather(send, recv, count, type);
}

Status Communicator::reduce_scatter(const void* send, void* recv, std::size_t count, DataType type,
                                    ReduceOp op) {
  MEMCOORD_RETURN_IF_ERROR(abort_state_->status());
  if (!IsValid(type)) return InvalidArgument(fmt::format("reduce_scatter: unknown data type {}", int(type)));
  if (!IsValid(op)) return InvalidArgument(fmt::format("reduce_scatter: unknown reduce op {}", int(op)));
  const std::string what = Describe("reduce_scatter", count, type, &op);
  if (count > 0 && (send == nullptr || recv == nullptr)) {
    return InvalidArgument(what + ": " + (send == nullptr ? "send" : "recv") + " buffer is null");
  }
  MEMCOORD_RETURN_IF_ERROR(SpanBytes(what, count, type, size_).status());
  const std::size_t bytes = count * SizeOf(type);
  if (Overlap(send, bytes * static_cast<std::size_t>(size_), recv, bytes)) {
    return InvalidArgument(what + ": send and recv overlap (reduce_scatter is not in place)");
  }
  MEMCOORD_RETURN_IF_ERROR(Verify({{4, static_cast<long long>(count), int(type), int(op), 0}}));
  return do_reduce_scatter(send, recv, count, type, op);
}

Status Communicator::barrier() {
  MEMCOORD_RETURN_IF_ERROR(abort_state_->status());
  MEMCOORD_RETURN_IF_ERROR(Verify({{5, 0, 0, 0, 0}}));
  return do_barrier();
}

Result<std::unique_ptr<Communicator>> Communicator::split(int color, int key) {
  MEMCOORD_RETURN_IF_ERROR(abort_state_->status());
  return do_split(color, key);
}

void Communicator::abort(std::string reason) {
  if (abort_state_->abort(std::move(reason))) do_abort();
}

}  // namespace memcoord
