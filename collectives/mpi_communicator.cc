#include "collectives/mpi_communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/detail/host_math.h"
#include "collectives/detail/mpi_types.h"

namespace memcoord {

using detail::MpiDatatype;
using detail::MpiErrorString;
using detail::MpiOp;
using Clock = std::chrono::steady_clock;

constexpr auto kSpinBeforeYield = std::chrono::microseconds(200);

// MPI requests of one collective, polled until done or the deadline; `finish` runs once on completion
// (the avg division).
class MpiPendingCollective final : public PendingCollective {
 public:
  MpiPendingCollective(MpiCommunicator& owner, std::string description)
      : owner_(owner),
        description_(std::move(description)),
        deadline_(Clock::now() + owner.options().timeout) {}
  ~MpiPendingCollective() override = default;

  std::vector<MPI_Request>& requests() { return requests_; }
  void set_finish(std::function<void()> finish) { finish_ = std::move(finish); }
  const std::string& description() const override { return description_; }

 private:
  Result<bool> do_poll() override {
    MEMCOORD_RETURN_IF_ERROR(owner_.abort_state()->status().WithContext(description_ + ": "));
    MEMCOORD_ASSIGN_OR_RETURN(bool done, TestOnce());
    if (done) return true;
    if (Clock::now() >= deadline_) return owner_.TimedOut(description_);
    return false;
  }

  Status do_wait() override {
    const auto spin_until = Clock::now() + kSpinBeforeYield;
    bool yielding = false;
    for (unsigned polls = 0;; ++polls) {
      if (owner_.abort_state()->aborted()) return owner_.abort_status().WithContext(description_ + ": ");
      MEMCOORD_ASSIGN_OR_RETURN(bool done, TestOnce());
      if (done) return Status::Ok();
      if (yielding || (polls & 15u) == 0) {
        const auto now = Clock::now();
        if (now >= deadline_) return owner_.TimedOut(description_);
        yielding = now >= spin_until;
      }
      // Spin first (a yield on a loaded machine costs a whole time slice), then yield: ranks are often
      // oversubscribed on few cores and a spinning rank would starve the peer it waits for.
      if (yielding) std::this_thread::yield();
    }
  }

  Result<bool> TestOnce() {
    int flag = 0;
    statuses_.resize(requests_.size());
    int rc = MPI_SUCCESS;
    if (requests_.size() ==
        1) {  // the common case; MPI_Test re-checks after progressing, MPI_Testall may not
      rc = MPI_Test(requests_.data(), &flag, statuses_.data());
      if (rc != MPI_SUCCESS && statuses_[0].MPI_ERROR == MPI_SUCCESS) statuses_[0].MPI_ERROR = rc;
    } else if (!requests_.empty()) {
      rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &flag, statuses_.data());
    }
    if (requests_.empty()) flag = 1;
    if (rc == MPI_ERR_IN_STATUS) {  // the real error sits in one request's status
      for (const MPI_Status& status : statuses_) {
        if (status.MPI_ERROR != MPI_SUCCESS && status.MPI_ERROR != MPI_ERR_PENDING) rc = status.MPI_ERROR;
      }
    }
    if (rc != MPI_SUCCESS) {
      owner_.abort(description_ + " failed in MPI");
      return Unavailable(fmt::format(
          "{} on a {}-rank MPI communicator failed: {}; the communicator is now aborted (a count or type "
          "that differs across ranks shows this way; verify_arguments names it)",
          description_, owner_.size(), MpiErrorString(rc)));
    }
    if (!flag) return false;
    if (finish_) finish_();
    finish_ = nullptr;
    return true;
  }

  MpiCommunicator& owner_;
  std::string description_;
  Clock::time_point deadline_;
  std::vector<MPI_Request> requests_;
  std::vector<MPI_Status> statuses_;
  std::function<void()> finish_;
};

namespace {

constexpr std::size_t kMaxChunk = std::size_t{1} << 30;  // elements per request, below INT_MAX

}  // namespace

Result<std::unique_ptr<MpiCommunicator>> MpiCommunicator::Create(MPI_Comm parent,
                                                                 CommunicatorOptions options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    return FailedPrecondition(
        "MpiCommunicator::Create: MPI is not initialized (create an MpiEnvironment first)");
  }
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_Comm_idup(parent, &dup, &request);
  if (rc != MPI_SUCCESS) return Unavailable("MPI_Comm_idup failed: " + MpiErrorString(rc));
  const auto deadline = Clock::now() + options.timeout;
  for (int flag = 0; !flag;) {
    rc = MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return Unavailable("MPI_Comm_idup failed: " + MpiErrorString(rc));
    if (!flag && Clock::now() >= deadline) {
      int size = 0;
      MPI_Comm_size(parent, &size);
      return DeadlineExceeded(fmt::format(
          "creating an MPI communicator over {} ranks did not complete within {} ms: a peer is dead or not "
          "creating it",
          size, options.timeout.count()));
    }
    if (!flag) std::this_thread::yield();
  }
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(dup, &rank);
  MPI_Comm_size(dup, &size);
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(dup, rank, size, options));
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, int rank, int size, CommunicatorOptions options)
    : Communicator(rank, size, options), comm_(comm) {}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !aborted() && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

// MPI aborts the whole job on any call after MPI_Finalize (MPI_Finalized alone stays legal): a communicator
// that outlives its MpiEnvironment must say so instead.
Status MpiCommunicator::CheckNotFinalized(std::string_view what) const {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized == 0) return Status::Ok();
  return FailedPrecondition(fmt::format(
      "{}: MPI was finalized (the MpiEnvironment ended) before this communicator's collectives; destroy "
      "communicators first",
      what));
}

Status MpiCommunicator::StartFailed(const std::string& what, int code) {
  abort(what + " could not start");
  return Unavailable(
      fmt::format("{} on a {}-rank MPI communicator could not start: {}; the communicator is now aborted",
                  what, size(), MpiErrorString(code)));
}

Result<std::unique_ptr<PendingCollective>> MpiCommunicator::do_start_allreduce(const void* send, void* recv,
                                                                               std::size_t count,
                                                                               DataType type, ReduceOp op) {
  MEMCOORD_RETURN_IF_ERROR(CheckNotFinalized("allreduce"));
  auto pending = std::make_unique<MpiPendingCollective>(*this, Describe("allreduce", count, type, &op));
  const std::size_t element = SizeOf(type);
  std::size_t offset = 0;
  do {  // at least one request, even for count 0: the call still synchronizes
    const std::size_t n = std::min(kMaxChunk, count - offset);
    const auto* s = static_cast<const char*>(send) + offset * element;
    auto* r = static_cast<char*>(recv) + offset * element;
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = MPI_Iallreduce(send == recv ? MPI_IN_PLACE : s, r, static_cast<int>(n), MpiDatatype(type),
                                  MpiOp(op, type), comm_, &request);
    if (rc != MPI_SUCCESS) return StartFailed(pending->description(), rc);
    pending->requests().push_back(request);
    offset += n;
  } while (offset < count);
  if (op == ReduceOp::kAvg && count > 0) {
    const int n = size();
    pending->set_finish([recv, count, type, n] { detail::DivideInPlace(recv, count, type, n); });
  }
  return std::unique_ptr<PendingCollective>(std::move(pending));
}

Status MpiCommunicator::do_broadcast(void* buffer, std::size_t count, DataType type, int root) {
  MEMCOORD_RETURN_IF_ERROR(CheckNotFinalized("broadcast"));
  MpiPendingCollective pending(*this,
                               fmt::format("{} from root {}", Describe("broadcast", count, type), root));
  const std::size_t element = SizeOf(type);
  std::size_t offset = 0;
  do {
    const std::size_t n = std::min(kMaxChunk, count - offset);
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = MPI_Ibcast(static_cast<char*>(buffer) + (count == 0 ? 0 : offset * element),
                              static_cast<int>(n), MpiDatatype(type), root, comm_, &request);
    if (rc != MPI_SUCCESS) return StartFailed(pending.description(), rc);
    pending.requests().push_back(request);
    offset += n;
  } while (offset < count);
  return pending.wait();
}

Status MpiCommunicator::do_allgather(const void* send, void* recv, std::size_t count, DataType type) {
  MEMCOORD_RETURN_IF_ERROR(CheckNotFinalized("allgather"));
  MpiPendingCollective pending(*this, Describe("allgather", count, type));
  if (count > static_cast<std::size_t>(INT_MAX)) {
    return InvalidArgument(pending.description() +
                           ": the MPI backend takes at most 2^31-1 elements per rank");
  }
  const auto* in_place =
      static_cast<const char*>(recv) + static_cast<std::size_t>(rank()) * count * SizeOf(type);
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc =
      MPI_Iallgather(send == in_place && count > 0 ? MPI_IN_PLACE : send, static_cast<int>(count),
                     MpiDatatype(type), recv, static_cast<int>(count), MpiDatatype(type), comm_, &request);
  if (rc != MPI_SUCCESS) return StartFailed(pending.description(), rc);
  pending.requests().push_back(request);
  return pending.wait();
}

Status MpiCommunicator::do_reduce_scatter(const void* send, void* recv, std::size_t count, DataType type,
                                          ReduceOp op) {
  MEMCOORD_RETURN_IF_ERROR(CheckNotFinalized("reduce_scatter"));
  MpiPendingCollective pending(*this, Describe("reduce_scatter", count, type, &op));
  if (count > static_cast<std::size_t>(INT_MAX)) {
    return InvalidArgument(pending.description() +
                           ": the MPI backend takes at most 2^31-1 elements per rank");
  }
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Ireduce_scatter_block(send, recv, static_cast<int>(count), MpiDatatype(type),
                                           MpiOp(op, type), comm_, &request);
  if (rc != MPI_SUCCESS) return StartFailed(pending.description(), rc);
  pending.requests().push_back(request);
  if (op == ReduceOp::kAvg && count > 0) {
    const int n = size();
    pending.set_finish([recv, count, type, n] { detail::DivideInPlace(recv, count, type, n); });
  }
  return pending.wait();
}

Status MpiCommunicator::do_barrier() {
  MEMCOORD_RETURN_IF_ERROR(CheckNotFinalized("barrier"));
  MpiPendingCollective pending(*this, "barrier");
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Ibarrier(comm_, &request);
  if (rc != MPI_SUCCESS) return StartFailed(pending.description(), rc);
  pending.requests().push_back(request);
  return pending.wait();
}

Status MpiCommunicator::do_max_allreduce_words(long long* words, int count, std::string_view what) {
  MEMCOORD_RETURN_IF_ERROR(CheckNotFinalized(what));
  // A heap copy, leaked when the call fails: an abandoned MPI request cannot be cancelled and may still write
  // its words when a late peer arrives, long after the caller's frame is gone.
  auto owned = std::make_unique<long long[]>(static_cast<std::size_t>(count));
  std::copy(words, words + count, owned.get());
  MpiPendingCollective pending(*this, std::string(what));
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, owned.get(), count, MPI_LONG_LONG, MPI_MAX, comm_, &request);
  if (rc != MPI_SUCCESS) return StartFailed(pending.description(), rc);
  pending.requests().push_back(request);
  Status waited = pending.wait();
  if (!waited.ok()) {
    (void)owned.release();
    return waited;
  }
  std::copy(owned.get(), owned.get() + count, words);
  return Status::Ok();
}

Result<std::unique_ptr<Communicator>> MpiCommunicator::do_split(int color, int key) {
  // Exchange (color, key) first with a polled allgather: MPI_Comm_split itself blocks, so it runs only once
  // every peer is known to be alive and splitting.
  const int mine[2] = {color, key};
  std::vector<int> all(2 * static_cast<std::size_t>(size()));
  MEMCOORD_RETURN_IF_ERROR(allgather(mine, all.data(), 2, DataType::kInt32).WithContext("split: "));
  MPI_Comm split = MPI_COMM_NULL;
  // Blocking, and not bounded by options().timeout: a peer that dies between the exchange above and its own
  // MPI_Comm_split leaves this call waiting (MPI has no nonblocking split); abort() cannot wake it.
  const int rc = MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &split);
  if (rc != MPI_SUCCESS) return StartFailed(fmt::format("split(color {}, key {})", color, key), rc);
  // An abort while it ran: no child of an aborted communicator (the aborted child is not freed, as an
  // aborted communicator never is).
  MEMCOORD_RETURN_IF_ERROR(abort_status());
  if (split == MPI_COMM_NULL) return std::unique_ptr<Communicator>();
  MPI_Comm_set_errhandler(split, MPI_ERRORS_RETURN);
  int new_rank = 0;
  int new_size = 0;
  MPI_Comm_rank(split, &new_rank);
  MPI_Comm_size(split, &new_size);
  return std::unique_ptr<Communicator>(new MpiCommunicator(split, new_rank, new_size, options()));
}

}  // namespace memcoord
