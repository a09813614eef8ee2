// dist/mpi_comm.cpp: see mpi_comm.h.
#include "dist/mpi_comm.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"

#ifdef GT_HAVE_MPI
#include <mpi.h>
#endif

namespace gt::dist {

namespace {
int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : -1;
}
}  // namespace

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v)) return true;
  if (env_int("SLURM_NTASKS") > 1 && std::getenv("SLURM_STEP_ID"))
    throw Error(fmt::format(
        "srun started {} tasks, but without a process-management interface MPI cannot join "
        "them into one job (each would train alone); launch with srun --mpi=pmix (or set "
        "MpiDefault=pmix in slurm.conf), or use mpirun",
        env_int("SLURM_NTASKS")));
  return false;
}

std::optional<int> local_rank_if_set() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (int r = env_int(v); r >= 0) return r;
  return std::nullopt;
}

int local_rank_from_env() { return local_rank_if_set().value_or(0); }

std::string node_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::vector<std::string> gather_node_names(Communicator& comm) {
  constexpr size_t kName = 64;
  const int n = comm.size(), me = comm.rank();
  std::vector<char> names(kName * n, 0);
  const std::string host = node_name().substr(0, kName - 1);
  std::memcpy(names.data() + kName * me, host.data(), host.size());
  comm.all_gather(names.data() + kName * me, names.data(), std::vector<size_t>(n, kName),
                  CommType::byte);
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) out.emplace_back(names.data() + kName * r);
  return out;
}

#ifndef GT_HAVE_MPI

bool mpi_available() { return false; }
MpiRuntime::MpiRuntime() {
  throw Error("this greentrain was built without MPI (install libopenmpi-dev and rebuild)");
}
MpiRuntime::~MpiRuntime() = default;
void MpiRuntime::abort(int code) { std::_Exit(code); }
std::unique_ptr<Communicator> make_mpi_communicator(double) {
  throw Error("this greentrain was built without MPI (install libopenmpi-dev and rebuild)");
}

#else

bool mpi_available() { return true; }

MpiRuntime::MpiRuntime() {
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    throw Error("MPI_Init_thread failed");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    throw Error(fmt::format(
        "this MPI library gives thread level {} but greentrain needs MPI_THREAD_SERIALIZED ({}) "
        "for its communication thread",
        provided, (int)MPI_THREAD_SERIALIZED));
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiRuntime::~MpiRuntime() {
  // Open MPI's MPI_Finalize waits for every rank (the standard does not promise it) and then
  // lets them exit; under srun --kill-on-bad-exit one that exits non-zero gets this one
  // killed, and what stdio still buffers would be lost
  std::fflush(stdout);
  std::fflush(stderr);
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
}

void MpiRuntime::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

namespace {

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(double timeout_s) : timeout_s_(timeout_s) {
    check(timeout_s > 0, fmt::format("dist.timeout_s = {}: expected seconds > 0", timeout_s));
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && !failed_) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  void all_reduce(void* buf, size_t count, CommType t, ReduceOp op) override {
    if (t == CommType::bf16) {  // as f32: the sum in fp32, rounded once
      std::vector<float> f(count);
      auto* h = static_cast<uint16_t*>(buf);
      for (size_t i = 0; i < count; ++i) f[i] = bf16_to_float(h[i]);
      all_reduce(f.data(), count, CommType::f32, op);
      for (size_t i = 0; i < count; ++i) h[i] = float_to_bf16(f[i]);
      return;
    }
    check(t != CommType::byte, "all_reduce: bytes cannot be summed");
    MPI_Request req;
    MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, mpi_type(t),
                   op == ReduceOp::sum ? MPI_SUM : MPI_MAX, comm_, &req);
    finish(&req, "all_reduce", count, t, 2 * count * comm_type_size(t) * (size_ - 1) / size_);
  }

  // An all-to-all of the chunks (each rank receives chunk rank() of every rank, its own
  // included), then the sum in rank order in fp32: the reduction order does not depend on
  // MPI's algorithms, and every rank's chunk is reduced once, by its owner.
  void reduce_scatter(const void* send, CommType send_type, float* recv,
                      const std::vector<size_t>& counts) override {
    check((int)counts.size() == size_, "reduce_scatter: one count per rank expected");
    check(send_type == CommType::f32 || send_type == CommType::bf16,
          "reduce_scatter: f32 or bf16 expected");
    const size_t es = comm_type_size(send_type), mine = counts[rank_];
    std::vector<int> scount(size_), sdispl(size_), rcount(size_), rdispl(size_);
    size_t off = 0;
    for (int r = 0; r < size_; ++r) {
      scount[r] = (int)(counts[r] * es);
      sdispl[r] = (int)(off * es);
      rcount[r] = (int)(mine * es);
      rdispl[r] = (int)(r * mine * es);
      off += counts[r];
    }
    staging_.resize(mine * es * size_);
    MPI_Request req;
    MPI_Ialltoallv(send, scount.data(), sdispl.data(), MPI_BYTE, staging_.data(), rcount.data(),
                   rdispl.data(), MPI_BYTE, comm_, &req);
    finish(&req, "reduce_scatter", off, send_type, (off - mine) * es);
    if (send_type == CommType::f32) {
      const auto* s = reinterpret_cast<const float*>(staging_.data());
      for (size_t i = 0; i < mine; ++i) {
        float acc = s[i];
        for (int r = 1; r < size_; ++r) acc += s[r * mine + i];
        recv[i] = acc;
      }
    } else {
      const auto* s = reinterpret_cast<const uint16_t*>(staging_.data());
      for (size_t i = 0; i < mine; ++i) {
        float acc = bf16_to_float(s[i]);
        for (int r = 1; r < size_; ++r) acc += bf16_to_float(s[r * mine + i]);
        recv[i] = acc;
      }
    }
  }

  void all_gather(const void* send, void* recv, const std::vector<size_t>& counts,
                  CommType t) override {
    check((int)counts.size() == size_, "all_gather: one count per rank expected");
    const size_t es = comm_type_size(t);
    std::vector<int> rcount(size_), rdispl(size_);
    size_t off = 0, my_off = 0;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) my_off = off;
      rcount[r] = (int)(counts[r] * es);
      rdispl[r] = (int)(off * es);
      off += counts[r];
    }
    const bool in_place = send == static_cast<const char*>(recv) + my_off * es;
    MPI_Request req;
    MPI_Iallgatherv(in_place ? MPI_IN_PLACE : send, rcount[rank_], MPI_BYTE, recv, rcount.data(),
                    rdispl.data(), MPI_BYTE, comm_, &req);
    finish(&req, "all_gather", off, t, counts[rank_] * es * (size_ - 1));
  }

  void broadcast(void* buf, size_t bytes, int root) override {
    MPI_Request req;
    MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, comm_, &req);
    finish(&req, "broadcast", bytes, CommType::byte, rank_ == root ? bytes * (size_ - 1) : 0);
  }

  void barrier() override {
    MPI_Request req;
    MPI_Ibarrier(comm_, &req);
    finish(&req, "barrier", 0, CommType::byte, 0);
  }

 private:
  static MPI_Datatype mpi_type(CommType t) {
    switch (t) {
      case CommType::f32:
        return MPI_FLOAT;
      case CommType::f64:
        return MPI_DOUBLE;
      case CommType::i64:
        return MPI_INT64_T;
      default:
        return MPI_BYTE;
    }
  }

  // Waits for req: MPI_Test in a loop (OpenMPI progresses non-blocking collectives inside MPI
  // calls; Communicator::wait_for paces the tests). Throws after timeout_s.
  void finish(MPI_Request* req, const char* what, size_t count, CommType t, size_t bytes) {
    wait_for(
        [&] {
          int done = 0;
          MPI_Test(req, &done, MPI_STATUS_IGNORE);
          return done != 0;
        },
        timeout_s_,
        [&] {
          failed_ = true;
          throw Error(fmt::format(
              "rank {} of {}: {} of {} {} elements did not complete within dist.timeout_s = {} "
              "s: another rank has died or stopped responding",
              rank_, size_, what, count, comm_type_name(t), timeout_s_));
        },
        bytes);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double timeout_s_;
  bool failed_ = false;
  std::vector<unsigned char> staging_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(double timeout_s) {
  return std::make_unique<MpiCommunicator>(timeout_s);
}

#endif  // GT_HAVE_MPI

}  // namespace gt::dist
