#include "collectives/gradient_bucketer.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <utility>

namespace memcoord {
namespace {

// `value` rounded up to `alignment` (a power of two), or false when that passes SIZE_MAX.
bool AlignUp(std::size_t value, std::size_t alignment, std::size_t& out) {
  std::size_t bumped = 0;
  if (__builtin_add_overflow(value, alignment - 1, &bumped)) return false;
  out = bumped / alignment * alignment;
  return true;
}

// FNV-1a over 64-bit words: a fingerprint of the layout inputs, equal on ranks that plan the same buckets.
class Fingerprint {
 public:
  void add(std::uint64_t word) {
    for (int i = 0; i < 8; ++i) {
      hash_ ^= (word >> (8 * i)) & 0xFF;
      hash_ *= 0x100000001B3ull;
    }
  }
  std::int64_t value() const { return static_cast<std::int64_t>(hash_ >> 1); }  // non-negative

 private:
  std::uint64_t hash_ = 0xCBF29CE484222325ull;
};

}  // namespace

Result<std::unique_ptr<GradientBucketer>> GradientBucketer::Create(Communicator& comm, BucketMemory& memory,
                                                                   std::vector<ParameterSpec> parameters,
                                                                   BucketerOptions options) {
  if (parameters.empty()) return InvalidArgument("GradientBucketer: no parameters registered");
  if (options.bucket_cap_bytes == 0 || options.first_bucket_cap_bytes == 0) {
    return InvalidArgument("GradientBucketer: bucket caps must be positive");
  }
  const std::size_t align = options.alignment_bytes;
  if (align == 0 || (align & (align - 1)) != 0 || align % 8 != 0) {
    return InvalidArgument(fmt::format(
        "GradientBucketer: alignment {} must be a power of two and a multiple of 8 bytes", align));
  }
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    if (!IsValid(parameters[p].type)) {
      return InvalidArgument(fmt::format("GradientBucketer: parameter {} has an unknown data type", p));
    }
  }

  std::unique_ptr<GradientBucketer> self(new GradientBucketer(comm, memory, options));
  self->slots_.resize(parameters.size());
  // Plan: walk parameters backwards (backward order), closing a bucket when the next parameter would take
  // it past its cap or has another type.
  // Every size is checked: a count near SIZE_MAX wrapped to a bucket of a few bytes that gradient(p) wrote
  // past.
  const auto too_large = [](std::size_t p) {
    return InvalidArgument(
        fmt::format("GradientBucketer: parameter {}'s gradients do not fit in memory (their bytes, or the "
                    "bucket holding them, pass SIZE_MAX)",
                    p));
  };
  std::size_t used = 0;
  for (std::size_t i = parameters.size(); i-- > 0;) {
    const ParameterSpec& spec = parameters[i];
    std::size_t bytes = 0;
    if (__builtin_mul_overflow(spec.count, SizeOf(spec.type), &bytes)) return too_large(i);
    std::size_t aligned = 0;
    if (!AlignUp(used, align, aligned)) return too_large(i);
    bool open_new = self->buckets_.empty();
    if (!open_new) {
      const BucketInfo& current = self->buckets_.back();
      const std::size_t current_cap =
          self->buckets_.size() == 1 ? options.first_bucket_cap_bytes : options.bucket_cap_bytes;
      open_new =
          current.type != spec.type || (used > 0 && (aligned > current_cap || bytes > current_cap - aligned));
    }
    if (open_new) {
      self->buckets_.push_back(BucketInfo{0, spec.type, {}});
      used = 0;
      aligned = 0;
    }
    BucketInfo& bucket = self->buckets_.back();
    self->slots_[i] = Slot{self->buckets_.size() - 1, aligned, false};
    bucket.parameters.push_back(i);
    if (__builtin_add_overflow(aligned, bytes, &used) || !AlignUp(used, align, bucket.bytes))
      return too_large(i);
  }

  MEMCOORD_RETURN_IF_ERROR(self->CheckLayoutAcrossRanks(parameters));

  // Allocate.
  self->state_.resize(self->buckets_.size());
  for (std::size_t b = 0; b < self->buckets_.size(); ++b) {
    Bucket& state = self->state_[b];
    const BucketInfo& info = self->buckets_[b];
    state.elements = info.bytes / SizeOf(info.type);
    state.waiting = info.parameters.size();
    if (info.bytes == 0) continue;
    Result<void*> data = memory.allocate(info.bytes, options.compute_stream);
    if (!data.ok()) {
      return data.status().WithContext(fmt::format("GradientBucketer: bucket {} of {} ({} bytes): ", b,
                                                   self->buckets_.size(), info.bytes));
    }
    state.data = *data;
    if (comm.stream() != options.compute_stream) {
      MEMCOORD_RETURN_IF_ERROR(memory.use_on(state.data, comm.stream()));
    }
    // Host buckets start zeroed so padding is never uninitialized memory on the wire.
    if (!comm.device_buffers()) std::memset(state.data, 0, info.bytes);
  }
  return self;
}

GradientBucketer::GradientBucketer(Communicator& comm, BucketMemory& memory, BucketerOptions options)
    : comm_(comm), memory_(memory), options_(options) {}

Status GradientBucketer::CheckLayoutAcrossRanks(const std::vector<ParameterSpec>& parameters) {
  if (!comm_.options().verify_arguments) return Status::Ok();
  Fingerprint fingerprint;
  std::uint64_t elements = 0;
  for (const ParameterSpec& spec : parameters) {
    fingerprint.add(spec.count);
    fingerprint.add(static_cast<std::uint64_t>(spec.type));
    elements += spec.count;
  }
  fingerprint.add(options_.bucket_cap_bytes);
  fingerprint.add(options_.first_bucket_cap_bytes);
  fingerprint.add(options_.alignment_bytes);
  const std::int64_t values[] = {static_cast<std::int64_t>(parameters.size()),
                                 static_cast<std::int64_t>(elements),
                                 static_cast<std::int64_t>(buckets_.size()), fingerprint.value()};
  const std::string_view names[] = {"number of parameters", "total gradient elements", "number of buckets",
                                    "fingerprint of parameter counts, types and bucket caps"};
  Status agreed = comm_.check_agreement("GradientBucketer: bucket layout check", values, names);
  if (agreed.code() != StatusCode::kInvalidArgument) return agreed;
  return InvalidArgument(agreed.message() +
                         "; every rank must register the same parameters (count and type, in the same order) "
                         "with the same bucket caps");
}

GradientBucketer::~GradientBucketer() {
  (void)WaitAll();  // memory must not go back while a collective may still touch it
  for (Bucket& bucket : state_) {
    // A bucket whose collective failed may still be written by the backend (an MPI request cannot be
    // cancelled): it is leaked rather than handed to someone else.
    if (bucket.data != nullptr && !bucket.unsafe_to_free) (void)memory_.deallocate(bucket.data);
  }
}

Status GradientBucketer::CheckParameter(std::string_view call, std::size_t parameter) const {
  if (parameter < slots_.size()) return Status::Ok();
  // Create refuses an empty model, so the range below is never empty.
  return InvalidArgument(fmt::format("{}: parameter {} is not registered; accepted: 0 to {} ({} parameters)",
                                     call, parameter, slots_.size() - 1, slots_.size()));
}

Result<std::size_t> GradientBucketer::bucket_of(std::size_t parameter) const {
  MEMCOORD_RETURN_IF_ERROR(CheckParameter("bucket_of", parameter));
  return slots_[parameter].bucket;
}

Result<void*> GradientBucketer::gradient(std::size_t parameter) const {
  MEMCOORD_RETURN_IF_ERROR(CheckParameter("gradient", parameter));
  const Slot& slot = slots_[parameter];
  char* base = static_cast<char*>(state_[slot.bucket].data);
  if (base == nullptr) return static_cast<void*>(nullptr);  // an all-empty bucket
  return static_cast<void*>(base + slot.offset_bytes);
}

Status GradientBucketer::mark_ready(std::size_t parameter) {
  MEMCOORD_RETURN_IF_ERROR(CheckParameter("mark_ready", parameter));
  MEMCOORD_RETURN_IF_ERROR(failed_);
  Slot& slot = slots_[parameter];
  if (slot.ready) {
    return FailedPrecondition(fmt::format(
        "mark_ready: parameter {} was already marked ready this step (call finish() first)", parameter));
  }
  slot.ready = true;
  --state_[slot.bucket].waiting;
  MEMCOORD_RETURN_IF_ERROR(LaunchReadyBuckets());
  return PollInFlight();
}

Status GradientBucketer::LaunchReadyBuckets() {
  while (next_launch_ < state_.size() && state_[next_launch_].waiting == 0) {
    Bucket& bucket = state_[next_launch_];
    Status ordered = comm_.order_after(options_.compute_stream);
    if (!ordered.ok()) return failed_ = ordered;
    // The layout was checked across ranks at creation: no per-launch check (and host wait) unless asked.
    const DataType type = buckets_[next_launch_].type;
    auto pending =
        options_.verify_every_launch
            ? comm_.start_allreduce(bucket.data, bucket.data, bucket.elements, type, ReduceOp::kAvg)
            : comm_.start_allreduce_checked_once(bucket.data, bucket.data, bucket.elements, type,
                                                 ReduceOp::kAvg);
    if (!pending.ok()) {
      return failed_ = pending.status().WithContext(fmt::format("gradient bucket {}: ", next_launch_));
    }
    bucket.in_flight = std::move(*pending);
    ++next_launch_;
  }
  return Status::Ok();
}

Status GradientBucketer::PollInFlight() {
  for (std::size_t b = 0; b < next_launch_; ++b) {
    if (!state_[b].in_flight) continue;
    Result<bool> done = state_[b].in_flight->poll();
    if (!done.ok()) {
      state_[b].unsafe_to_free = true;
      state_[b].in_flight.reset();
      return failed_ = done.status().WithContext(fmt::format("gradient bucket {}: ", b));
    }
    if (*done) state_[b].in_flight.reset();
  }
  return Status::Ok();
}

Status GradientBucketer::WaitAll() {
  Status first;
  for (std::size_t b = 0; b < state_.size(); ++b) {
    if (!state_[b].in_flight) continue;
    Status s = state_[b].in_flight->wait();
    state_[b].in_flight.reset();
    if (!s.ok()) state_[b].unsafe_to_free = true;
    if (!s.ok() && first.ok()) first = s.WithContext(fmt::format("gradient bucket {}: ", b));
  }
  return first;
}

void GradientBucketer::ResetStep() {
  for (Slot& slot : slots_) slot.ready = false;
  for (std::size_t b = 0; b < state_.size(); ++b) state_[b].waiting = buckets_[b].parameters.size();
  next_launch_ = 0;
}

Status GradientBucketer::finish() {
  MEMCOORD_RETURN_IF_ERROR(failed_);
  Status waited = WaitAll();
  if (!waited.ok()) {
    failed_ = waited;
    return waited;
  }
  if (next_launch_ < state_.size()) {
    std::size_t missing = 0;
    std::size_t first = 0;
    for (std::size_t p = slots_.size(); p-- > 0;) {
      if (!slots_[p].ready) {
        if (missing++ == 0) first = p;
      }
    }
    ResetStep();
    // This rank issued fewer collectives than its peers: every later bucket would pair with another bucket of
    // theirs and average the wrong gradients, with no error anywhere. The communicator is aborted (the peers'
    // next collectives fail too) and this bucketer stays failed: the job must restart.
    failed_ = FailedPrecondition(fmt::format(
        "finish: {} parameter(s) were never marked ready this step (first in backward order: parameter {}), "
        "so "
        "their buckets were never reduced and this rank's collectives no longer match its peers'; the "
        "communicator was aborted: restart the job",
        missing, first));
    comm_.abort(failed_.message());
    return failed_;
  }
  ResetStep();
  return Status::Ok();
}

}  // namespace memcoord
