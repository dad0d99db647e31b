// MpiCommunicator: the Communicator over MPI, on host buffers. Each one duplicates its parent communicator
// (its traffic never matches the application's own MPI calls) and sets MPI_ERRORS_RETURN on it, so an MPI
// failure becomes a Status instead of Open MPI's default job abort. Every collective is nonblocking
// (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather, MPI_Ireduce_scatter_block, MPI_Ibarrier) and polled with
// MPI_Testall until it completes or options().timeout passes, which is how a dead peer becomes
// DEADLINE_EXCEEDED instead of a hang (see MpiEnvironment for leaving the process afterwards).
// fp16/bf16 reduce in fp32 through user-defined ops; avg is a sum divided on the host after completion.
// Counts above 2^31-1 are split into several requests for allreduce and broadcast; allgather and
// reduce_scatter refuse them (INVALID_ARGUMENT).
//
// Thread safety and ownership as in Communicator. Requires an initialized MPI with at least
// MPI_THREAD_SERIALIZED (MpiEnvironment). An aborted communicator is not freed with MPI_Comm_free (a
// collective may still be pending on it); MPI_Finalize or process exit reclaims it.
#pragma once

#include <mpi.h>

#include <memory>

#include "collectives/communicator.h"

namespace memcoord {

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `parent` (MPI_Comm_idup, polled until options.timeout). Collective over `parent`.
  // Errors: FAILED_PRECONDITION when MPI is not initialized; DEADLINE_EXCEEDED; UNAVAILABLE on MPI errors.
  static Result<std::unique_ptr<MpiCommunicator>> Create(MPI_Comm parent, CommunicatorOptions options = {});
  ~MpiCommunicator() override;

  std::string_view backend() const override { return "mpi"; }
  bool device_buffers() const override { return false; }
  MPI_Comm comm() const { return comm_; }

 private:
  friend class MpiPendingCollective;
  MpiCommunicator(MPI_Comm comm, int rank, int size, CommunicatorOptions options);

  Result<std::unique_ptr<PendingCollective>> do_start_allreduce(const void* send, void* recv,
                                                                std::size_t count, DataType type,
                                                                ReduceOp op) override;
  Status do_broadcast(void* buffer, std::size_t count, DataType type, int root) override;
  Status do_allgather(const void* send, void* recv, std::size_t count, DataType type) override;
  Status do_reduce_scatter(const void* send, void* recv, std::size_t count, DataType type,
                           ReduceOp op) override;
  Status do_barrier() override;
  Result<std::unique_ptr<Communicator>> do_split(int color, int key) override;
  void do_abort() override {}
  Status do_max_allreduce_words(long long* words, int count, std::string_view what) override;

  // Error from starting a request: aborts the communicator (its collectives may now be out of step).
  Status CheckNotFinalized(std::string_view what) const;
  Status StartFailed(const std::string& what, int code);

  MPI_Comm comm_;
};

}  // namespace memcoord
