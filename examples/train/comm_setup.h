// RankComms: the communicators one memcoord-train rank uses.
//   world      MPI over every rank (host buffers): progress records, the final report;
//   group      MPI over the ranks training the same model (split from world by model): checksums, eval;
//   gradients  what the GradientBucketer averages over: NCCL over the group when every rank of the group
//              computes on its own GPU (NCCL refuses two ranks on one GPU), otherwise the group's MPI
//              communicator (host buffers; device gradients are staged through host memory).
// `why` says in one sentence which backend carries gradients and why, for the progress display.
// Collective over MPI_COMM_WORLD. Errors: the communicators' errors; FAILED_PRECONDITION when NCCL was
// asked for (`want` == "nccl") and cannot be used, naming the reason.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "collectives/communicator.h"
#include "common/result.h"

namespace memcoord::train {

struct RankComms {
  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> group;
  std::unique_ptr<Communicator> nccl;  // set when NCCL carries gradients
  Communicator* gradients = nullptr;
  std::string why;
};

// A number naming (this host, CUDA ordinal `device`): equal on two ranks exactly when they share a GPU.
std::int64_t DeviceKey(int device);

// `device` is this rank's CUDA ordinal (-1 on the host path); `want` is "auto", "mpi" or "nccl".
Result<RankComms> SetUpComms(int color, int device, const std::string& want,
                             std::chrono::milliseconds timeout);

}  // namespace memcoord::train
