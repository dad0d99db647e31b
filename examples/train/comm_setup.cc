#include "examples/train/comm_setup.h"

#include <unistd.h>

#include <functional>
#include <set>
#include <vector>

#include "collectives/mpi_communicator.h"
#include "collectives/mpi_rendezvous.h"
#ifdef MEMCOORD_HAVE_NCCL
#include "collectives/nccl_communicator.h"
#endif

namespace memcoord::train {
std::int64_t DeviceKey(int device) {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::size_t h = std::hash<std::string>{}(host);
  return static_cast<std::int64_t>((h & 0xFFFFFFFFFFull) << 8) + device + 1;
}

Result<RankComms> SetUpComms(int color, int device, const std::string& want,
                             std::chrono::milliseconds timeout) {
  if (want != "auto" && want != "mpi" && want != "nccl") {
    return InvalidArgument("--comm must be auto, mpi or nccl, got '" + want + "'");
  }
  CommunicatorOptions options;
  options.timeout = timeout;
  RankComms c;
  MEMCOORD_ASSIGN_OR_RETURN(std::unique_ptr<MpiCommunicator> world,
                            MpiCommunicator::Create(MPI_COMM_WORLD, options));
  c.world = std::move(world);
  MEMCOORD_ASSIGN_OR_RETURN(c.group, c.world->split(color, c.world->rank()));
  c.gradients = c.group.get();

  // Which (host, GPU) each rank of the group computes on.
  std::vector<std::int64_t> keys(static_cast<std::size_t>(c.group->size()));
  const std::int64_t mine = device < 0 ? -1 : DeviceKey(device);
  MEMCOORD_RETURN_IF_ERROR(c.group->allgather(&mine, keys.data(), 1, DataType::kInt64));
  bool all_gpu = true;
  for (std::int64_t k : keys) all_gpu = all_gpu && k >= 0;
  const bool distinct = std::set<std::int64_t>(keys.begin(), keys.end()).size() == keys.size();

  std::string no_nccl;
#ifndef MEMCOORD_HAVE_NCCL
  no_nccl = "this build has no NCCL";
#endif
  if (no_nccl.empty() && !all_gpu) no_nccl = "the group computes on the host";
  if (no_nccl.empty() && !distinct) {
    no_nccl = "ranks of the group share a GPU and NCCL needs one GPU per rank";
  }
  if (want == "nccl" && !no_nccl.empty()) return FailedPrecondition("--comm nccl: " + no_nccl);
  if (want == "mpi" || !no_nccl.empty()) {
    c.why = "gradients over MPI (" + (want == "mpi" ? std::string("asked for") : no_nccl) + ")";
    return c;
  }
#ifdef MEMCOORD_HAVE_NCCL
  auto* group_mpi = static_cast<MpiCommunicator*>(c.group.get());
  MEMCOORD_ASSIGN_OR_RETURN(std::unique_ptr<NcclRendezvous> rendezvous,
                            MakeMpiRendezvous(group_mpi->comm(), timeout));
  NcclCommunicatorOptions nccl_options;
  nccl_options.device = device;
  nccl_options.communicator = options;
  MEMCOORD_ASSIGN_OR_RETURN(std::unique_ptr<NcclCommunicator> nccl,
                            NcclCommunicator::Create(*rendezvous, nccl_options));
  c.nccl = std::move(nccl);
  c.gradients = c.nccl.get();
  c.why = "gradients over NCCL (one GPU per rank)";
#endif
  return c;
}

}  // namespace memcoord::train
