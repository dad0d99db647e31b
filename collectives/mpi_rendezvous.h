// MakeMpiRendezvous: an NcclRendezvous over MPI, for NCCL communicators started under mpirun (the unique id
// travels by broadcast, bus ids by allgather). Built only with MPI (MEMCOORD_HAVE_MPI).
// Collective over `parent` (duplicated inside, so it never matches the application's traffic); every call
// polls with `timeout` like MpiCommunicator. REQUIRES: MPI initialized (MpiEnvironment).
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>

#include "collectives/nccl_rendezvous.h"

namespace memcoord {

Result<std::unique_ptr<NcclRendezvous>> MakeMpiRendezvous(MPI_Comm parent, std::chrono::milliseconds timeout);

}  // namespace memcoord
