// NcclRendezvous: how NCCL ranks meet before ncclCommInitRank. They exchange one small string each (their
// GPU's PCI bus id, or why they have none) so every rank can refuse a duplicate GPU or a missing one with the
// same clear error, and rank 0 hands everyone the ncclUniqueId. Two ways to meet:
//   MakeMpiRendezvous(MPI_Comm)           under mpirun: MPI_Iallgather/MPI_Ibcast with the usual timeouts;
//   MakeKeyValueRendezvous(store, ...)    through a KeyValueBootstrap (the coordinator's, or a file store):
//                                         keys "<prefix>/<round>/<rank>", each round written once.
// Every call is collective over the group and returns DEADLINE_EXCEEDED when a peer does not show up in time.
// Thread safety: one thread at a time. Ownership: the MPI rendezvous does not own the MPI communicator it
// duplicates from; the key/value rendezvous does not own its store, which must outlive it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/key_value_bootstrap.h"
#include "common/result.h"

namespace memcoord {

class NcclRendezvous {
 public:
  NcclRendezvous() = default;
  NcclRendezvous(const NcclRendezvous&) = delete;
  NcclRendezvous& operator=(const NcclRendezvous&) = delete;
  virtual ~NcclRendezvous() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank's `mine`, indexed by rank.
  virtual Result<std::vector<std::string>> allgather(std::string_view mine,
                                                     std::chrono::milliseconds timeout) = 0;
  // Root's `value` on every rank (`value` is ignored elsewhere).
  virtual Result<std::string> broadcast(std::string_view value, int root,
                                        std::chrono::milliseconds timeout) = 0;
};

// REQUIRES: 0 <= rank < size; every rank uses the same `prefix` (unique per communicator and per job).
std::unique_ptr<NcclRendezvous> MakeKeyValueRendezvous(KeyValueBootstrap& store, std::string prefix, int rank,
                                                       int size);

}  // namespace memcoord
