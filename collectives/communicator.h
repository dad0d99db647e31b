// Communicator: one rank's handle on a group of ranks that run collectives together (gradients between
// data-parallel workers). Backends: MpiCommunicator (host buffers, runs everywhere) and NcclCommunicator
// (device buffers, one rank per GPU). Training code sees only this interface.
//
// Semantics. Every rank of the group calls the same collectives in the same order with the same count,
// type, op and root; buffers hold `count` elements of `type` (allgather: recv holds size()*count;
// reduce_scatter: send holds size()*count). In place: allreduce with send == recv; allgather with
// send == recv + rank()*count. Zero counts are legal (the call still synchronizes with the group).
//
// Timeouts instead of hangs. Each wait of a call is bounded by options().timeout: with verify_arguments, the
// argument check and the collective wait up to it each (on NCCL, each one's enqueue and its completion), so
// a call ends within 2 x timeout of its start on MPI and 4 x on NCCL (1 x and 2 x without the check); split()
// on MPI is the exception (MPI_Comm_split blocks, see MpiCommunicator). A peer that died or
// stopped calling turns into DEADLINE_EXCEEDED naming the operation, its size and the peer count, and the
// communicator is aborted (nothing more can run on it: its state is unknown once a collective is half
// done). The buffers of the collective that failed may still be written by the backend later (an MPI request
// cannot be cancelled): do not free or reuse them. After that the process should leave: see MpiEnvironment
// for exiting without a hanging finalize.
//
// Bad input returns INVALID_ARGUMENT and changes nothing: null buffers with count > 0, an unknown type or op,
// a root out of range, overlapping buffers where not allowed, counts whose bytes pass PTRDIFF_MAX. With
// options().verify_arguments each call first compares operation, count, type, op and root across ranks (one
// small extra collective) and returns INVALID_ARGUMENT naming what differs; without it a mismatch shows as a
// backend error or a timeout. That check waits on the host for every rank (and, on NCCL, for all work queued
// on the stream), so a caller that issues a fixed sequence of collectives checks the sequence once with
// check_agreement and launches with start_allreduce_checked_once: GradientBucketer checks its bucket layout
// at creation, the way PyTorch DDP checks model shapes once, and its bucket launches never wait on the host.
//
// Thread safety: a communicator is used by one thread at a time (collectives are ordered); aborted(),
// abort_status() and abort() may be called from any thread, and abort() wakes a thread blocked in a call.
// Ownership: a communicator is independent of the one it was split from; each must be destroyed by its
// owner. A PendingCollective must not outlive its communicator.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "collectives/data_type.h"
#include "collectives/stream.h"
#include "common/result.h"

namespace memcoord {

struct CommunicatorOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Compare operation, count, type, op and root across ranks before each call (one extra 80-byte allreduce
  // that waits on the host for every rank, and on NCCL for the stream). Off, a mismatch is undetectable on
  // some ranks (MPI may hand the rank with the larger count a silently partial result while the others get
  // MPI_ERR_TRUNCATE). GradientBucketer reads it as "check my layout once at creation" and never checks per
  // launch (see start_allreduce_checked_once): on by default, and the bucketed gradients still overlap.
  bool verify_arguments = true;
};

// Shared between a communicator and its pending collectives: once aborted, everything fails fast.
class AbortState {
 public:
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  Status status() const;  // OK until aborted; then ABORTED with the reason
  // First reason wins; returns false when already aborted.
  bool abort(std::string reason);

 private:
  std::atomic<bool> aborted_{false};  // set once, under mu_, after reason_
  mutable std::mutex mu_;
  std::string reason_;  // guarded by mu_
};

// A collective in flight (from Communicator::start_allreduce). Its buffers belong to it until wait()
// returns or poll() returns true; the result is in place then. Destroying it unfinished aborts nothing but
// leaves the communicator unusable for ordered calls; always wait.
class PendingCollective {
 public:
  PendingCollective() = default;
  PendingCollective(const PendingCollective&) = delete;
  PendingCollective& operator=(const PendingCollective&) = delete;
  virtual ~PendingCollective() = default;

  // Never blocks: true when complete, false while running; an error (ABORTED, DEADLINE_EXCEEDED once past
  // the deadline, a backend error) when it failed. Calling it drives MPI progress.
  Result<bool> poll();
  // Blocks until complete, failed, or the deadline set at its start.
  Status wait();
  // "allreduce(sum, 1000 x fp32)": names the operation in errors.
  virtual const std::string& description() const = 0;

 private:
  virtual Result<bool> do_poll() = 0;
  virtual Status do_wait() = 0;
  Status final_status_;
  bool done_ = false;
};

class Communicator {
 public:
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  virtual ~Communicator() = default;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const CommunicatorOptions& options() const { return options_; }
  virtual std::string_view backend() const = 0;  // "mpi", "nccl"
  // True when buffers must be device memory (NCCL); false for host memory (MPI).
  virtual bool device_buffers() const = 0;
  // The stream collectives run on (kDefaultCommStream for MPI).
  virtual CommStream stream() const { return kDefaultCommStream; }
  // Makes later collectives wait for work queued so far on `producer` (a device-side wait; no-op on MPI).
  virtual Status order_after(CommStream producer);

  Status allreduce(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);
  Result<std::unique_ptr<PendingCollective>> start_allreduce(const void* send, void* recv, std::size_t count,
                                                             DataType type, ReduceOp op);
  // start_allreduce without the per-call cross-rank argument check, whatever verify_arguments says: for a
  // caller whose sequence of collectives was agreed across ranks once with check_agreement (local argument
  // checks still run). Never waits on the host for peers.
  Result<std::unique_ptr<PendingCollective>> start_allreduce_checked_once(const void* send, void* recv,
                                                                          std::size_t count, DataType type,
                                                                          ReduceOp op);

  // Compares `values` across ranks: one small MAX allreduce, collective and blocking (runs whatever
  // verify_arguments says). OK when every rank passed the same values; else INVALID_ARGUMENT "<what>: ranks
  // disagree on the <names[i]> (between <min> and <max> ...)" for the first field that differs.
  // REQUIRES: values.size() == names.size() <= kMaxAgreementFields, else INVALID_ARGUMENT (locally).
  static constexpr std::size_t kMaxAgreementFields = 8;
  Status check_agreement(std::string_view what, std::span<const std::int64_t> values,
                         std::span<const std::string_view> names);
  Status broadcast(void* buffer, std::size_t count, DataType type, int root);
  Status allgather(const void* send, void* recv, std::size_t count, DataType type);
  Status reduce_scatter(const void* send, void* recv, std::size_t count, DataType type, ReduceOp op);
  Status barrier();

  // Ranks passing the same color form a new communicator, ordered by key (ties: by old rank). A negative
  // color takes no part and gets a null pointer. Collective over this communicator.
  Result<std::unique_ptr<Communicator>> split(int color, int key);

  // Aborts locally: every later call, and any thread blocked in one, returns ABORTED with `reason`.
  // NCCL: ncclCommAbort. Never calls MPI_Abort (that would kill every rank; MpiEnvironment::abort_job does).
  void abort(std::string reason = "aborted by the caller");
  bool aborted() const { return abort_state_->aborted(); }
  Status abort_status() const { return abort_state_->status(); }

 protected:
  Communicator(int rank, int size, CommunicatorOptions options);
  const std::shared_ptr<AbortState>& abort_state() const { return abort_state_; }
  // The error a call returns when the deadline passes; also aborts the communicator.
  Status TimedOut(std::string_view operation);

  // What verify_arguments compares across ranks: operation (1 allreduce, 2 broadcast, 3 allgather,
  // 4 reduce_scatter, 5 barrier), count, type, op, root.
  static constexpr int kSignatureFields = 5;
  struct Signature {
    long long fields[kSignatureFields] = {};
  };
  static std::string Describe(std::string_view operation, std::size_t count, DataType type,
                              const ReduceOp* op = nullptr);

 private:
  // Hooks: arguments are already checked and the communicator is not aborted.
  virtual Result<std::unique_ptr<PendingCollective>> do_start_allreduce(const void* send, void* recv,
                                                                        std::size_t count, DataType type,
                                                                        ReduceOp op) = 0;
  virtual Status do_broadcast(void* buffer, std::size_t count, DataType type, int root) = 0;
  virtual Status do_allgather(const void* send, void* recv, std::size_t count, DataType type) = 0;
  virtual Status do_reduce_scatter(const void* send, void* recv, std::size_t count, DataType type,
                                   ReduceOp op) = 0;
  virtual Status do_barrier() = 0;
  virtual Result<std::unique_ptr<Communicator>> do_split(int color, int key) = 0;
  virtual void do_abort() = 0;
  // MAX-allreduces `count` (<= 2 * kMaxAgreementFields) int64 words in place, blocking; `what` names it in
  // errors. The agreement checks pack {v..., -v...} so one call yields every field's maximum and minimum.
  virtual Status do_max_allreduce_words(long long* words, int count, std::string_view what) = 0;

  Status Verify(const Signature& signature);
  // check_agreement's body; `describe` prints field i's value in an error.
  Status Agree(std::string_view what, const long long* values, const std::string_view* names, int count,
               std::string (*describe)(int field, long long value));
  Result<std::unique_ptr<PendingCollective>> StartAllreduce(const void* send, void* recv, std::size_t count,
                                                            DataType type, ReduceOp op, bool verify);

  int rank_;
  int size_;
  CommunicatorOptions options_;
  std::shared_ptr<AbortState> abort_state_;
};

}  // namespace memcoord
