#include "examples/train/abort_exit.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <thread>
#include <utility>

#include "collectives/mpi_environment.h"

namespace memcoord::train {

std::string DescribeAbort(const AbortInfo& info) {
  std::string what = "the job was aborted by the coordinator: ";
  const std::string named = fmt::format("rank {} ", info.dead_rank);
  if (info.dead_rank >= 0 && info.reason.rfind(named, 0) == 0) return what + info.reason;
  what +=
      info.dead_rank >= 0 ? fmt::format("rank {}", info.dead_rank) : "a rank the coordinator did not name";
  return what + " died (" + (info.reason.empty() ? "no reason given" : info.reason) + ")";
}

void ExitAborted(int rank, const std::string& what) {
  static std::atomic<bool> leaving{false};
  if (leaving.exchange(true)) {
    // Another thread is writing the message and exiting; never return (the caller is [[noreturn]]).
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  std::fprintf(stderr,
               "memcoord-train rank %d: %s; exiting with code %d (MEMCOORD_EXIT_ABORTED) so the launcher can "
               "restart the job\n",
               rank, what.c_str(), kExitAborted);
  MpiEnvironment::ExitWithoutFinalize(kExitAborted);
}

void ArmAbortExit(Worker& worker, std::vector<Communicator*> comms, int rank,
                  std::chrono::milliseconds grace) {
  worker.on_abort_info([comms = std::move(comms), rank, grace](const AbortInfo& info) {
    const std::string what = DescribeAbort(info);
    for (Communicator* c : comms) {
      if (c != nullptr) c->abort(what);
    }
    // The session thread must not wait here; the backstop is a thread of its own.
    std::thread([rank, grace, what] {
      std::this_thread::sleep_for(grace);
      ExitAborted(rank, what + " (the training thread did not leave within " + std::to_string(grace.count()) +
                            " ms; ended by the backstop)");
    }).detach();
  });
}

}  // namespace memcoord::train
