#include "worker/topology.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace memcoord {
namespace {

// Reads an integer variable: nullopt when unset, an error when malformed.
Result<std::optional<int>> ReadInt(const EnvLookup& env, const char* name) {
  const char* text = env(name);
  if (text == nullptr || *text == '\0') return std::optional<int>();
  int value = 0;
  const char* end = text + std::strlen(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end || value < 0) {
    return InvalidArgument(fmt::format("{}='{}' is not a non-negative integer", name, text));
  }
  return std::optional<int>(value);
}

struct Names {
  const char* source;
  const char* rank;
  const char* local_rank;
  const char* world_size;
};

}  // namespace

Result<Topology> DiscoverTopology(const EnvLookup& env) {
  static const Names kLaunchers[] = {
      {"memcoord", "MEMCOORD_RANK", "MEMCOORD_LOCAL_RANK", "MEMCOORD_WORLD_SIZE"},
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"pmix", "PMIX_RANK", "PMIX_LOCAL_RANK", "PMIX_SIZE"},
      {"slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},
  };
  for (const Names& names : kLaunchers) {
    MEMCOORD_ASSIGN_OR_RETURN(std::optional<int> rank, ReadInt(env, names.rank));
    if (!rank) continue;
    MEMCOORD_ASSIGN_OR_RETURN(std::optional<int> local, ReadInt(env, names.local_rank));
    MEMCOORD_ASSIGN_OR_RETURN(std::optional<int> world, ReadInt(env, names.world_size));
    if (!local && std::strcmp(names.source, "pmix") == 0) {
      // PMIx itself exports only the rank; the launcher usually adds one of these.
      for (const char* alt : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}) {
        MEMCOORD_ASSIGN_OR_RETURN(std::optional<int> v, ReadInt(env, alt));
        if (v) {
          local = v;
          break;
        }
      }
      if (!world) {
        MEMCOORD_ASSIGN_OR_RETURN(world, ReadInt(env, "OMPI_COMM_WORLD_SIZE"));
      }
    }
    Topology t;
    t.source = names.source;
    t.rank = *rank;
    t.local_rank = local.value_or(0);
    t.world_size = world.value_or(*rank + 1);
    if (t.world_size <= 0 || t.rank >= t.world_size) {
      return InvalidArgument(
          fmt::format("{}={} is not below {}={}", names.rank, t.rank, names.world_size, t.world_size));
    }
    return t;
  }
  return Topology{};
}

Result<Topology> DiscoverTopology() {
  return DiscoverTopology([](const char* name) { return std::getenv(name); });
}

int DeviceForLocalRank(int local_rank, int visible_devices) {
  if (visible_devices <= 0) return -1;
  return local_rank % visible_devices;
}

}  // namespace memcoord
