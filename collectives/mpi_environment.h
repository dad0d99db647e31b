// MpiEnvironment: owns MPI's lifetime in one process (MPI_Init_thread with MPI_THREAD_SERIALIZED, then
// MPI_Finalize on destruction) and the two ways out when a peer died.
//
// Why the exits exist. Under Open MPI, a collective with a dead peer never completes; MPI_Finalize may then
// wait for it too. After a communicator returns DEADLINE_EXCEEDED or ABORTED, a rank should leave through
// ExitWithoutFinalize (flushes stdio, then _exit: the other survivors keep their own timeouts) or AbortJob
// (MPI_Abort: mpirun kills every rank). Note that plain `mpirun` kills all ranks as soon as one exits
// without MPI_Finalize; survivors only get to see the error under `mpirun --enable-recovery` or a launcher
// that does not kill the job (and then mpirun's own exit status is always 0: read the ranks' output).
//
// Init also sets MPI_ERRORS_RETURN on MPI_COMM_WORLD and MPI_COMM_SELF: Open MPI reports an error found while
// completing a nonblocking collective (MPI_Testall) through MPI_COMM_WORLD's handler, whose default
// (MPI_ERRORS_ARE_FATAL) would kill the job instead of letting the communicator return a Status.
//
// Thread safety: create one per process, on the main thread, before any communicator; destroy it after them.
// If MPI was already initialized by someone else, Init adopts it and never finalizes.
#pragma once

#include <memory>

#include "common/result.h"

namespace memcoord {

class MpiEnvironment {
 public:
  // Errors: UNAVAILABLE when MPI_Init_thread fails or gives less than MPI_THREAD_SERIALIZED.
  static Result<std::unique_ptr<MpiEnvironment>> Init(int* argc, char*** argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

  // Flushes stdout/stderr and ends the process with `code`, skipping MPI_Finalize and destructors.
  [[noreturn]] static void ExitWithoutFinalize(int code);
  // MPI_Abort on MPI_COMM_WORLD: the launcher kills every rank of the job.
  [[noreturn]] static void AbortJob(int code);

 private:
  MpiEnvironment(bool owns, int world_rank, int world_size);
  bool owns_;
  int world_rank_;
  int world_size_;
};

}  // namespace memcoord
