// dist/mpi_comm.h: MPI (Debian's OpenMPI) as the launcher and host-memory communicator of a
// data-parallel job. `mpirun -np N greentrain train ...` and `srun --mpi=pmix greentrain train
// ...` start N ranks; each calls MpiRuntime once. Collectives are MPI's non-blocking ones
// (MPI_Ialltoallv, MPI_Iallgatherv, MPI_Ibcast, MPI_Iallreduce, MPI_Ibarrier) waited on with
// a time-out, so a rank that died or hung makes the others stop with an error instead of
// waiting forever.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace gt::dist {

/// Whether this build has MPI (GT_HAVE_MPI).
bool mpi_available();

/// Whether this process was started by an MPI launcher as one of several ranks: mpirun/mpiexec
/// (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK) or Slurm's srun with a PMI plugin (PMIX_RANK,
/// PMI_RANK). Throws gt::Error when srun started several tasks (SLURM_NTASKS > 1) without a
/// PMI plugin, so that they do not run as unrelated copies of one job (the message says to use
/// srun --mpi=pmix).
bool launched_by_mpi();

/// MPI for the life of the process: MPI_Init_thread (MPI_THREAD_SERIALIZED: the collectives of
/// one communicator are called by one thread at a time, the trainer's or its communication
/// thread's) on construction, MPI_Finalize on destruction. Throws gt::Error when this build
/// has no MPI or MPI cannot start.
class MpiRuntime {
 public:
  MpiRuntime();
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Ends every rank of the job with exit code `code` (MPI_Abort): after an error on one rank,
  /// so that the others do not wait for it in a collective.
  [[noreturn]] static void abort(int code);

 private:
  int rank_ = 0, size_ = 1;
};

/// A communicator over all ranks (a duplicate of MPI_COMM_WORLD) whose collectives throw
/// gt::Error after timeout_s seconds without completing (> 0). Needs a live MpiRuntime.
std::unique_ptr<Communicator> make_mpi_communicator(double timeout_s);

/// This process's index among the ranks on its node, from the launcher's environment
/// (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID); 0 when none is set. Chooses
/// the GPU of a rank (backend.h device_for_local_rank: "cuda" becomes "cuda:<local rank>").
int local_rank_from_env();

/// The same, null where none of those variables is set (a launcher that gives no local rank).
std::optional<int> local_rank_if_set();

/// The host name of this rank's node (gethostname), for counting nodes.
std::string node_name();

/// Every rank's node_name() (the first 63 bytes), in rank order. Collective: every rank of
/// `comm` calls it.
std::vector<std::string> gather_node_names(Communicator& comm);

}  // namespace gt::dist
