// Topology: this process's place in the job (rank, local rank on its host, world size), found from the
// launcher's environment. Explicit MEMCOORD_RANK / MEMCOORD_LOCAL_RANK / MEMCOORD_WORLD_SIZE win; then
// Open MPI (OMPI_COMM_WORLD_RANK/_LOCAL_RANK/_SIZE), PMIx (PMIX_RANK, with OMPI/MPI_LOCALRANKID/
// PMIX_LOCAL_RANK for the local rank), Slurm (SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS). Nothing set: a
// single process (rank 0 of 1). Pure functions of the environment passed in; thread-safe.
#pragma once

#include <functional>
#include <string>

#include "common/result.h"

namespace memcoord {

struct Topology {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  std::string source = "default";  // "memcoord", "openmpi", "pmix", "slurm", "default"
};

using EnvLookup = std::function<const char*(const char*)>;

// Errors: INVALID_ARGUMENT naming the variable when a value is not a number or out of range
// (rank >= world size, negative values).
Result<Topology> DiscoverTopology(const EnvLookup& env);
Result<Topology> DiscoverTopology();  // from the process environment

// The CUDA ordinal for a local rank among `visible_devices` (CUDA_VISIBLE_DEVICES already applied by CUDA's
// numbering): local_rank modulo the count; -1 when there is no device.
int DeviceForLocalRank(int local_rank, int visible_devices);

}  // namespace memcoord
