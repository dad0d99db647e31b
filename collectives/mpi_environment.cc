#include "collectives/mpi_environment.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace memcoord {

Result<std::unique_ptr<MpiEnvironment>> MpiEnvironment::Init(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  bool owns = false;
  if (!initialized) {
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
      return Unavailable("MPI_Init_thread failed");
    }
    owns = true;
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      return Unavailable("MPI provides thread level " + std::to_string(provided) +
                         ", below MPI_THREAD_SERIALIZED which communicators need");
    }
  }
  // Open MPI reports errors found while completing nonblocking collectives (MPI_Test*) through
  // MPI_COMM_WORLD's handler, not the request's communicator; the default handler aborts the whole job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<MpiEnvironment>(new MpiEnvironment(owns, rank, size));
}

MpiEnvironment::MpiEnvironment(bool owns, int world_rank, int world_size)
    : owns_(owns), world_rank_(world_rank), world_size_(world_size) {}

MpiEnvironment::~MpiEnvironment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

void MpiEnvironment::ExitWithoutFinalize(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

void MpiEnvironment::AbortJob(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort should not return
}

}  // namespace memcoord
