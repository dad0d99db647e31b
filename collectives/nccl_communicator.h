// NcclCommunicator: the Communicator over NCCL, on device buffers, one rank per GPU. Built only with NCCL
// (MEMCOORD_HAVE_NCCL); on a machine without a usable GPU Create returns UNAVAILABLE (any CUDA error at
// start-up counts as "no GPU") and nothing else changes, so one binary serves both kinds of machine.
//
// Start-up: ranks meet through an NcclRendezvous (MPI under mpirun, or a KeyValueBootstrap), exchange their
// GPUs' PCI bus ids and refuse, on every rank alike, a GPU used by two ranks (NCCL would fail with "Duplicate
// GPU detected") or a rank without a GPU; rank 0's ncclUniqueId is broadcast; ncclCommInitRankConfig runs in
// NCCL's nonblocking mode and is polled, so a peer that never arrives is DEADLINE_EXCEEDED, not a hang.
//
// Collectives run on the communicator's own stream (stream()); they read buffers after work queued earlier on
// that stream, and after work on other streams only through order_after(producer). Completion is an event
// polled together with ncclCommGetAsyncError until options().timeout; a timeout or an NCCL error calls
// ncclCommAbort, and the communicator is aborted. Buffers must be device (or managed) memory: host pointers
// are INVALID_ARGUMENT, never handed to NCCL. verify_arguments runs one extra 10-word NCCL allreduce and
// waits for the stream.
//
// Current device (the CUDA runtime's, per thread). Create makes options.device current on the calling thread
// and leaves it current, also when it fails after probing the GPU: NCCL's init reads it, and a rank drives
// its one GPU from there on. Every other call (collectives, order_after, split, the argument check, poll and
// wait) and the destructors of the communicator and of its pending collectives make device() current for
// their own CUDA calls and then restore the caller's device, so a thread that has moved to another GPU may
// still use or destroy them, and is left where it was.
//
// Thread safety: as Communicator. Every NCCL call on the comm runs under the Impl's comm mutex (NCCL calls on
// one comm must not overlap), but the mutex is held for one call only, never across a wait: every poll loop
// (an enqueue still connecting, split, finalize, a collective's completion) checks the atomic abort flag
// before taking it and releases it between polls. abort() sets the flag first, then takes the mutex and runs
// ncclCommAbort, so a thread blocked on a missing peer returns ABORTED (with the abort's reason) within one
// poll of the abort, whatever the timeout.
// Ownership: owns its ncclComm_t, stream and a 128-byte scratch buffer (cudaMalloc, for barrier and checks).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

struct ncclComm;
struct CUstream_st;

#include "collectives/communicator.h"
#include "collectives/nccl_rendezvous.h"

namespace memcoord {

struct NcclCommunicatorOptions {
  int device = 0;  // CUDA ordinal this rank uses
  CommunicatorOptions communicator;
  // Polled while Create waits in NCCL's nonblocking init: once aborted (from any thread), Create calls
  // ncclCommAbort and returns ABORTED with its reason. Not owned; must outlive Create. Null: never cancelled.
  const AbortState* cancel_creation = nullptr;
};

class NcclCommunicator final : public Communicator {
 public:
  // Collective over the rendezvous group. Errors: UNAVAILABLE (no GPU here or on a peer, named);
  // FAILED_PRECONDITION (two ranks on one GPU, named); DEADLINE_EXCEEDED; ABORTED (cancel_creation);
  // INTERNAL for other NCCL errors. Leaves options.device current on the calling thread (see above).
  static Result<std::unique_ptr<NcclCommunicator>> Create(NcclRendezvous& rendezvous,
                                                          NcclCommunicatorOptions options = {});
  ~NcclCommunicator() override;

  std::string_view backend() const override { return "nccl"; }
  bool device_buffers() const override { return true; }
  CommStream stream() const override;
  // REQUIRES: `producer` is a stream of device(); kDefaultCommStream means device()'s default stream,
  // whatever device is current on the calling thread. Errors: the CUDA failure, and the communicator's abort.
  Status order_after(CommStream producer) override;
  int device() const { return device_; }

 private:
  class Impl;
  friend class NcclPendingCollective;
  NcclCommunicator(std::unique_ptr<Impl> impl, int rank, int size, int device, CommunicatorOptions options);

  Result<std::unique_ptr<PendingCollective>> do_start_allreduce(const void* send, void* recv,
                                                                std::size_t count, DataType type,
                                                                ReduceOp op) override;
  Status do_broadcast(void* buffer, std::size_t count, DataType type, int root) override;
  Status do_allgather(const void* send, void* recv, std::size_t count, DataType type) override;
  Status do_reduce_scatter(const void* send, void* recv, std::size_t count, DataType type,
                           ReduceOp op) override;
  Status do_barrier() override;
  Result<std::unique_ptr<Communicator>> do_split(int color, int key) override;
  void do_abort() override;
  Status do_max_allreduce_words(long long* words, int count, std::string_view what) override;

  // One NCCL call, enqueued under the comm mutex; returns its ncclResult_t.
  using Enqueue = std::function<int(ncclComm*, CUstream_st*)>;
  Result<std::unique_ptr<PendingCollective>> Launch(std::string what, const Enqueue& enqueue);
  Status Run(std::string what, const Enqueue& enqueue);  // Launch and wait
  static Result<std::unique_ptr<Impl>> Wrap(ncclComm* comm, int device);

  std::unique_ptr<Impl> impl_;
  int device_;
};

}  // namespace memcoord
