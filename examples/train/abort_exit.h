// How a memcoord-train rank ends when the coordinator aborts its group (a peer rank died, or went silent
// for longer than the coordinator's dead-after). ArmAbortExit sets the worker's abort hook: it aborts every
// communicator the rank holds (world, group, NCCL), so a training thread blocked in any collective returns
// ABORTED at once, and it starts a backstop that ends the process `grace` later if the training thread has
// not left by then (blocked where no communicator reaches, e.g. a raw MPI call). ExitAborted is the one way
// out: one line on stderr naming the dead rank and the coordinator's reason, then exit code
// kExitAborted (MEMCOORD_EXIT_ABORTED, 75: "aborted because another rank died", which memcoord-launch
// recognizes), without MPI_Finalize (a collective with the dead peer never completes).
//
// Thread safety: ExitAborted may be called from any thread, also twice at once: the first caller writes and
// exits, a later one waits for it. Ownership: the hook borrows the communicators; they must outlive the
// worker's session (destroy them after Worker::shutdown(), or leave through ExitAborted).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "worker/memcoord.h"
#include "worker/worker.h"

namespace memcoord::train {

inline constexpr int kExitAborted = MEMCOORD_EXIT_ABORTED;

// The abort as one sentence: "the job was aborted by the coordinator: rank 2 (host h, pid 42) is dead:
// session stream broke (...)"; names the dead rank even when the coordinator's text does not.
std::string DescribeAbort(const AbortInfo& info);

// Replaces the worker's abort-info hook (called at once when the abort already came: arming again, with the
// communicators once they exist, is how set-up and training share it). Null entries of `comms` are skipped
// (no NCCL communicator); see the ownership note above.
void ArmAbortExit(Worker& worker, std::vector<Communicator*> comms, int rank,
                  std::chrono::milliseconds grace);

// Writes "memcoord-train rank R: <what>; exiting with code 75 ..." and ends the process with kExitAborted.
[[noreturn]] void ExitAborted(int rank, const std::string& what);

}  // namespace memcoord::train
