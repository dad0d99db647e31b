#include "collectives/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "common/cuda_status.h"

namespace memcoord {

using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kScratchBytes = 128;

ncclDataType_t NcclType(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  return ncclSum;
}

// With one rank an average is the value itself: map it to a sum (a copy). NCCL 2.28.3's one-rank
// pre-multiplied-sum path gave wrong fp64 averages for 65,537 elements on the H200 (every other type, op and
// size was bit-exact), so the single-rank case never takes that path.
ncclRedOp_t NcclOpFor(ReduceOp op, int ranks) {
  if (op == ReduceOp::kAvg && ranks == 1) return ncclSum;
  return NcclOp(op);
}

// Makes `device` current on the calling thread for the guard's lifetime and restores the caller's device
// afterwards (the CUDA runtime's current device is per thread, and a multi-GPU process may have moved it).
// Every CUDA call here that works on the communicator's device (stream, event, memory: creating, recording,
// querying, destroying) runs under one. NCCL calls need none: NCCL switches to the comm's device itself.
// Setting is skipped when the device is already current (the poll path stays two cheap calls). status()
// says whether the device was made current; destructors go on regardless (best effort, nothing to report).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    status_ = CudaRuntimeStatus(cudaGetDevice(&previous_), "cudaGetDevice");
    if (status_.ok() && previous_ != device) {
      status_ = CudaRuntimeStatus(cudaSetDevice(device), fmt::format("cudaSetDevice({})", device));
      restore_ = status_.ok();
    }
  }
  ~DeviceGuard() {
    if (restore_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  bool restore_ = false;
  Status status_;
};

// A CUDA destroy/free call from a destructor: nothing can be reported, but a failure must not leave a stale
// "last error" for the caller's next cudaGetLastError (a kernel-launch check) to pick up.
void IgnoreCudaError(cudaError_t e) {
  if (e != cudaSuccess) (void)cudaGetLastError();
}

Status NcclError(ncclResult_t result, std::string_view what, ncclComm_t comm) {
  std::string detail = comm != nullptr ? ncclGetLastError(comm) : "";
  return Internal(fmt::format("{}: NCCL error {} ({}){}{}", what, static_cast<int>(result),
                              ncclGetErrorString(result), detail.empty() ? "" : ": ", detail));
}

// Polls the asynchronous state of the nonblocking communicator in `*comm` until it leaves ncclInProgress, the
// deadline passes, or `abort` is set. `mu`, when given, guards `*comm` (abort() nulls it under `mu`) and is
// held only around each ncclCommGetAsyncError, never across the wait: an abort from another thread takes it
// within one NCCL call. The abort flag is checked before the lock is taken, so once it is set this loop never
// competes with abort() for the lock.
Status PollUntilReady(ncclComm_t* comm, std::mutex* mu, const AbortState* abort, std::string_view what,
                      Clock::time_point deadline, std::chrono::milliseconds timeout) {
  for (;;) {
    if (abort != nullptr && abort->aborted()) return abort->status().WithContext(std::string(what) + ": ");
    ncclResult_t state = ncclSuccess;
    {
      std::unique_lock<std::mutex> lock;
      if (mu != nullptr) lock = std::unique_lock<std::mutex>(*mu);
      if (*comm == nullptr) {  // aborted between the check above and the lock
        return abort != nullptr ? abort->status().WithContext(std::string(what) + ": ")
                                : Aborted(std::string(what) + ": the communicator is gone");
      }
      const ncclResult_t r = ncclCommGetAsyncError(*comm, &state);
      if (r != ncclSuccess) return NcclError(r, what, *comm);
      if (state != ncclSuccess && state != ncclInProgress) return NcclError(state, what, *comm);
    }
    if (state == ncclSuccess) return Status::Ok();
    if (Clock::now() >= deadline) {
      return DeadlineExceeded(fmt::format("{} did not complete within {} ms: a peer is dead or not joining",
                                          what, timeout.count()));
    }
    std::this_thread::yield();
  }
}

// Device or managed memory only, and device memory of this communicator's GPU: a host pointer, or another
// GPU's memory, handed to NCCL would fault the whole context.
Status CheckDevicePointer(const void* pointer, int device, std::string_view role, std::string_view what) {
  if (pointer == nullptr) return Status::Ok();
  cudaPointerAttributes attributes{};
  const cudaError_t e = cudaPointerGetAttributes(&attributes, pointer);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return InvalidArgument(
        fmt::format("{}: {} buffer is not CUDA memory ({})", what, role, cudaGetErrorString(e)));
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) {
    return InvalidArgument(
        fmt::format("{}: {} buffer is host memory; the NCCL communicator needs device buffers", what, role));
  }
  if (attributes.type == cudaMemoryTypeDevice && attributes.device != device) {
    return InvalidArgument(fmt::format("{}: {} buffer is memory of GPU {}; this communicator runs on GPU {}",
                                       what, role, attributes.device, device));
  }
  return Status::Ok();
}

}  // namespace

class NcclCommunicator::Impl {
 public:
  explicit Impl(int cuda_device) : device(cuda_device) {}
  ~Impl() {
    DeviceGuard on_device(device);  // the stream and memory belong to `device`, not the caller's
    if (stream != nullptr) IgnoreCudaError(cudaStreamDestroy(stream));
    if (scratch != nullptr) IgnoreCudaError(cudaFree(scratch));
    if (host_scratch != nullptr) IgnoreCudaError(cudaFreeHost(host_scratch));
  }
  const int device;  // the CUDA ordinal everything below lives on
  std::mutex comm_mu;
  ncclComm_t comm = nullptr;  // guarded by comm_mu; null once aborted
  cudaStream_t stream = nullptr;
  void* scratch = nullptr;       // kScratchBytes of device memory
  void* host_scratch = nullptr;  // kScratchBytes of pinned host memory
};

// One enqueued NCCL call: an event recorded after it on the communicator's stream. The event belongs to the
// communicator's device, so querying and destroying it make that device current (and restore the caller's).
class NcclPendingCollective final : public PendingCollective {
 public:
  NcclPendingCollective(NcclCommunicator& owner, std::string description, cudaEvent_t event)
      : owner_(owner),
        description_(std::move(description)),
        deadline_(Clock::now() + owner.options().timeout),
        device_(owner.device()),
        event_(event) {}
  ~NcclPendingCollective() override {
    DeviceGuard on_device(device_);
    IgnoreCudaError(cudaEventDestroy(event_));
  }
  const std::string& description() const override { return description_; }

 private:
  Result<bool> do_poll() override {
    MEMCOORD_RETURN_IF_ERROR(owner_.abort_status().WithContext(description_ + ": "));
    {
      std::lock_guard<std::mutex> lock(owner_.impl_->comm_mu);
      if (owner_.impl_->comm == nullptr) return owner_.abort_status().WithContext(description_ + ": ");
      ncclResult_t state = ncclSuccess;
      ncclResult_t r = ncclCommGetAsyncError(owner_.impl_->comm, &state);
      if (r == ncclSuccess) r = state;
      if (r != ncclSuccess && r != ncclInProgress) failed_ = NcclError(r, description_, owner_.impl_->comm);
    }
    if (!failed_.ok()) {
      owner_.abort(description_ + " failed in NCCL");
      return failed_;
    }
    Result<bool> done = EventDone();
    if (!done.ok()) {
      owner_.abort(description_ + " failed in CUDA");
      return done.status().WithContext(description_ + ": ");
    }
    if (*done) return true;
    if (Clock::now() >= deadline_) return owner_.TimedOut(description_);
    return false;
  }

  // Whether the event has completed, asked with its device current. Errors: the CUDA failure, of the query
  // or of making the device current.
  Result<bool> EventDone() const {
    DeviceGuard on_device(device_);
    MEMCOORD_RETURN_IF_ERROR(on_device.status());
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaSuccess || e == cudaErrorNotReady) return e == cudaSuccess;
    return CudaRuntimeStatus(e, "cudaEventQuery");
  }

  Status do_wait() override {
    for (;;) {
      MEMCOORD_ASSIGN_OR_RETURN(bool done, do_poll());
      if (done) return Status::Ok();
      std::this_thread::yield();
    }
  }

  NcclCommunicator& owner_;
  std::string description_;
  Clock::time_point deadline_;
  const int device_;  // the device event_ was created on
  cudaEvent_t event_;
  Status failed_;
};

// --- creation
// -------------------------------------------------------------------------------------------------

namespace {

// This rank's GPU as "<bus id>", or "!<why not>" when it has none usable.
std::string ProbeGpu(int device) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return fmt::format("!no usable GPU: cudaGetDeviceCount: {}", cudaGetErrorString(e));
  }
  if (device < 0 || device >= count)
    return fmt::format("!device {} does not exist ({} visible)", device, count);
  e = cudaSetDevice(device);
  char bus_id[64] = {};
  if (e == cudaSuccess) e = cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return fmt::format("!device {} is not usable: {}", device, cudaGetErrorString(e));
  }
  return bus_id;
}

Status CheckGpus(const std::vector<std::string>& gpus) {
  for (std::size_t r = 0; r < gpus.size(); ++r) {
    if (!gpus[r].empty() && gpus[r][0] == '!') {
      return Unavailable(
          fmt::format("NCCL communicator: rank {} has no GPU it can use ({})", r, gpus[r].substr(1)));
    }
  }
  std::map<std::string, std::size_t> first_rank;
  for (std::size_t r = 0; r < gpus.size(); ++r) {
    auto [it, inserted] = first_rank.emplace(gpus[r], r);
    if (!inserted) {
      return FailedPrecondition(
          fmt::format("NCCL communicator: ranks {} and {} both use the GPU at PCI bus id {}; NCCL allows one "
                      "rank per GPU "
                      "(\"Duplicate GPU detected\"): start one rank per GPU and give each its own device "
                      "(e.g. from the local "
                      "rank)",
                      it->second, r, gpus[r]));
    }
  }
  return Status::Ok();
}

}  // namespace

// Builds the stream and scratch buffers around an initialized comm; aborts the comm on failure.
Result<std::unique_ptr<NcclCommunicator::Impl>> NcclCommunicator::Wrap(ncclComm_t comm, int device) {
  auto impl = std::make_unique<NcclCommunicator::Impl>(device);
  impl->comm = comm;
  DeviceGuard on_device(device);
  Status s = on_device.status();
  if (s.ok())
    s = CudaRuntimeStatus(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking),
                          "cudaStreamCreate");
  if (s.ok()) s = CudaRuntimeStatus(cudaMalloc(&impl->scratch, kScratchBytes), "cudaMalloc(scratch)");
  if (s.ok())
    s = CudaRuntimeStatus(cudaMallocHost(&impl->host_scratch, kScratchBytes), "cudaMallocHost(scratch)");
  if (!s.ok()) {
    ncclCommAbort(comm);
    impl->comm = nullptr;
    return s;
  }
  return impl;
}

Result<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(NcclRendezvous& rendezvous,
                                                                   NcclCommunicatorOptions options) {
  const auto timeout = options.communicator.timeout;
  const auto deadline = Clock::now() + timeout;
  const int rank = rendezvous.rank();
  const int size = rendezvous.size();
  MEMCOORD_ASSIGN_OR_RETURN(std::vector<std::string> gpus,
                            rendezvous.allgather(ProbeGpu(options.device), timeout));
  MEMCOORD_RETURN_IF_ERROR(CheckGpus(gpus));

  std::string id_bytes;
  if (rank == 0) {
    ncclUniqueId id;
    const ncclResult_t r = ncclGetUniqueId(&id);
    id_bytes = r == ncclSuccess ? std::string(id.internal, sizeof(id.internal))
                                : "!" + std::string(ncclGetErrorString(r));
  }
  MEMCOORD_ASSIGN_OR_RETURN(id_bytes, rendezvous.broadcast(id_bytes, 0, timeout));
  if (id_bytes.size() != sizeof(ncclUniqueId::internal)) {
    return Internal("NCCL communicator: rank 0 could not make an NCCL unique id: " + id_bytes.substr(1));
  }
  ncclUniqueId id;
  std::memcpy(id.internal, id_bytes.data(), sizeof(id.internal));

  MEMCOORD_RETURN_IF_ERROR(CudaRuntimeStatus(cudaSetDevice(options.device), "cudaSetDevice"));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  const std::string what =
      fmt::format("ncclCommInitRank (rank {} of {}, device {})", rank, size, options.device);
  if (r != ncclSuccess && r != ncclInProgress) {
    Status error = NcclError(r, what, comm);
    if (comm != nullptr) ncclCommAbort(comm);
    return error;
  }
  // Init runs in NCCL's own thread; it is polled (and abandoned on a deadline or on `cancel_creation`).
  Status ready = PollUntilReady(&comm, nullptr, options.cancel_creation, what, deadline, timeout);
  if (!ready.ok()) {
    ncclCommAbort(comm);
    return ready;
  }
  MEMCOORD_ASSIGN_OR_RETURN(auto impl, Wrap(comm, options.device));
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(std::move(impl), rank, size, options.device, options.communicator));
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl, int rank, int size, int device,
                                   CommunicatorOptions options)
    : Communicator(rank, size, options), impl_(std::move(impl)), device_(device) {}

NcclCommunicator::~NcclCommunicator() {
  // On this communicator's device, restoring the caller's at the end (Impl's destructor, which runs after
  // this body, frees the stream and scratch under its own guard).
  DeviceGuard on_device(device_);
  // Finalize flushes queued work; bounded by the timeout (and by an abort), then abort.
  Status done;
  {
    std::lock_guard<std::mutex> lock(impl_->comm_mu);
    if (impl_->comm == nullptr) return;
    const ncclResult_t r = ncclCommFinalize(impl_->comm);
    if (r != ncclSuccess && r != ncclInProgress) done = NcclError(r, "ncclCommFinalize", impl_->comm);
  }
  if (done.ok()) {
    done = PollUntilReady(&impl_->comm, &impl_->comm_mu, abort_state().get(), "ncclCommFinalize",
                          Clock::now() + options().timeout, options().timeout);
  }
  std::lock_guard<std::mutex> lock(impl_->comm_mu);
  if (impl_->comm == nullptr) return;  // aborted meanwhile
  if (done.ok()) {
    ncclCommDestroy(impl_->comm);
  } else {
    ncclCommAbort(impl_->comm);
  }
  impl_->comm = nullptr;
}

CommStream NcclCommunicator::stream() const { return reinterpret_cast<CommStream>(impl_->stream); }

Status NcclCommunicator::order_after(CommStream producer) {
  MEMCOORD_RETURN_IF_ERROR(abort_status());
  const auto producer_stream = reinterpret_cast<cudaStream_t>(producer);
  if (producer_stream == impl_->stream) return Status::Ok();
  // The event must be created on the producer's device (kDefaultCommStream: the default stream of the
  // device current here), which is this communicator's.
  DeviceGuard on_device(device_);
  MEMCOORD_RETURN_IF_ERROR(on_device.status());
  cudaEvent_t event = nullptr;
  MEMCOORD_RETURN_IF_ERROR(
      CudaRuntimeStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate"));
  Status s = CudaRuntimeStatus(cudaEventRecord(event, producer_stream), "cudaEventRecord");
  if (s.ok()) s = CudaRuntimeStatus(cudaStreamWaitEvent(impl_->stream, event, 0), "cudaStreamWaitEvent");
  IgnoreCudaError(cudaEventDestroy(event));
  return s;
}

// No device guard: ncclCommAbort switches to the comm's device itself (and restores the caller's).
void NcclCommunicator::do_abort() {
  std::lock_guard<std::mutex> lock(impl_->comm_mu);
  if (impl_->comm == nullptr) return;
  ncclCommAbort(impl_->comm);
  impl_->comm = nullptr;
}

// --- collectives
// ----------------------------------------------------------------------------------------------

Result<std::unique_ptr<PendingCollective>> NcclCommunicator::Launch(std::string what,
                                                                    const Enqueue& enqueue) {
  DeviceGuard on_device(device_);  // the completion event is created and recorded on this device
  MEMCOORD_RETURN_IF_ERROR(on_device.status().WithContext(what + ": "));
  Status failed;
  bool in_progress = false;
  {
    std::lock_guard<std::mutex> lock(impl_->comm_mu);
    if (impl_->comm == nullptr) return abort_status().WithContext(what + ": ");
    const auto r = static_cast<ncclResult_t>(enqueue(impl_->comm, impl_->stream));
    in_progress = r == ncclInProgress;
    if (r != ncclSuccess && !in_progress) failed = NcclError(r, what, impl_->comm);
  }
  // A nonblocking enqueue may still be connecting to its peers: poll it without holding the comm mutex, so an
  // abort from another thread can run ncclCommAbort and end the wait.
  if (in_progress) {
    failed = PollUntilReady(&impl_->comm, &impl_->comm_mu, abort_state().get(), what,
                            Clock::now() + options().timeout, options().timeout);
  }
  if (!failed.ok()) {
    if (failed.code() == StatusCode::kAborted) return failed;
    if (failed.code() == StatusCode::kDeadlineExceeded) return TimedOut(what);
    abort(what + " could not be enqueued");
    return failed;
  }
  cudaEvent_t event = nullptr;
  Status s = CudaRuntimeStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  if (s.ok()) s = CudaRuntimeStatus(cudaEventRecord(event, impl_->stream), "cudaEventRecord");
  if (!s.ok()) {
    if (event != nullptr) IgnoreCudaError(cudaEventDestroy(event));
    abort(what + " could not record its completion event");
    return s.WithContext(what + ": ");
  }
  return std::unique_ptr<PendingCollective>(
      std::make_unique<NcclPendingCollective>(*this, std::move(what), event));
}

Status NcclCommunicator::Run(std::string what, const Enqueue& enqueue) {
  MEMCOORD_ASSIGN_OR_RETURN(std::unique_ptr<PendingCollective> pending, Launch(std::move(what), enqueue));
  return pending->wait();
}

Result<std::unique_ptr<PendingCollective>> NcclCommunicator::do_start_allreduce(const void* send, void* recv,
                                                                                std::size_t count,
                                                                                DataType type, ReduceOp op) {
  std::string what = Describe("allreduce", count, type, &op);
  MEMCOORD_RETURN_IF_ERROR(CheckDevicePointer(send, device_, "send", what));
  MEMCOORD_RETURN_IF_ERROR(CheckDevicePointer(recv, device_, "recv", what));
  const int ranks = size();
  return Launch(std::move(what), [=](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(send, recv, count, NcclType(type), NcclOpFor(op, ranks), comm, stream);
  });
}

Status NcclCommunicator::do_broadcast(void* buffer, std::size_t count, DataType type, int root) {
  std::string what = fmt::format("{} from root {}", Describe("broadcast", count, type), root);
  MEMCOORD_RETURN_IF_ERROR(CheckDevicePointer(buffer, device_, "the", what));
  return Run(std::move(what), [=](ncclComm_t comm, cudaStream_t stream) {
    return ncclBroadcast(buffer, buffer, count, NcclType(type), root, comm, stream);
  });
}

Status NcclCommunicator::do_allgather(const void* send, void* recv, std::size_t count, DataType type) {
  std::string what = Describe("allgather", count, type);
  MEMCOORD_RETURN_IF_ERROR(CheckDevicePointer(send, device_, "send", what));
  MEMCOORD_RETURN_IF_ERROR(CheckDevicePointer(recv, device_, "recv", what));
  return Run(std::move(what), [=](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllGather(send, recv, count, NcclType(type), comm, stream);
  });
}

Status NcclCommunicator::do_reduce_scatter(const void* send, void* recv, std::size_t count, DataType type,
                                           ReduceOp op) {
  std::string what = Describe("reduce_scatter", count, type, &op);
  MEMCOORD_RETURN_IF_ERROR(CheckDevicePointer(send, device_, "send", what));
  MEMCOORD_RETURN_IF_ERROR(CheckDevicePointer(recv, device_, "recv", what));
  const int ranks = size();
  return Run(std::move(what), [=](ncclComm_t comm, cudaStream_t stream) {
    return ncclReduceScatter(send, recv, count, NcclType(type), NcclOpFor(op, ranks), comm, stream);
  });
}

Status NcclCommunicator::do_barrier() {
  void* scratch = impl_->scratch;
  return Run("barrier", [=](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(scratch, scratch, 1, ncclInt32, ncclSum, comm, stream);
  });
}

Status NcclCommunicator::do_max_allreduce_words(long long* words, int count, std::string_view what) {
  static_assert(2 * kMaxAgreementFields * sizeof(long long) <= kScratchBytes);
  const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(long long);
  auto* pinned = static_cast<long long*>(impl_->host_scratch);
  std::copy(words, words + count, pinned);
  void* scratch = impl_->scratch;
  DeviceGuard on_device(device_);
  MEMCOORD_RETURN_IF_ERROR(on_device.status());
  MEMCOORD_RETURN_IF_ERROR(
      CudaRuntimeStatus(cudaMemcpyAsync(scratch, pinned, bytes, cudaMemcpyHostToDevice, impl_->stream),
                        "cudaMemcpyAsync(check)"));
  // Run waits for the allreduce itself (and so for everything queued before it on the stream: this is the
  // host wait the per-call argument check costs), so the copy back below finds an idle stream.
  MEMCOORD_RETURN_IF_ERROR(Run(std::string(what), [=](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(scratch, scratch, static_cast<std::size_t>(count), ncclInt64, ncclMax, comm, stream);
  }));
  MEMCOORD_RETURN_IF_ERROR(
      CudaRuntimeStatus(cudaMemcpyAsync(pinned, scratch, bytes, cudaMemcpyDeviceToHost, impl_->stream),
                        "cudaMemcpyAsync(check)"));
  MEMCOORD_RETURN_IF_ERROR(
      CudaRuntimeStatus(cudaStreamSynchronize(impl_->stream), "cudaStreamSynchronize(check)"));
  std::copy(pinned, pinned + count, words);
  return Status::Ok();
}

Result<std::unique_ptr<Communicator>> NcclCommunicator::do_split(int color, int key) {
  const std::string what = fmt::format("ncclCommSplit(color {}, key {})", color, key);
  DeviceGuard on_device(device_);  // the child comm, its stream and scratch live on this device
  MEMCOORD_RETURN_IF_ERROR(on_device.status());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t child = nullptr;
  Status failed;
  {
    std::lock_guard<std::mutex> lock(impl_->comm_mu);
    if (impl_->comm == nullptr) return abort_status();
    const ncclResult_t r =
        ncclCommSplit(impl_->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, &config);
    if (r != ncclSuccess && r != ncclInProgress) failed = NcclError(r, what, impl_->comm);
  }
  // Polled with the comm mutex released between polls (see Launch); the child is this thread's alone.
  const auto deadline = Clock::now() + options().timeout;
  if (failed.ok()) {
    failed =
        PollUntilReady(&impl_->comm, &impl_->comm_mu, abort_state().get(), what, deadline, options().timeout);
  }
  if (failed.ok() && child != nullptr) {
    failed = PollUntilReady(&child, nullptr, abort_state().get(), what, deadline, options().timeout);
  }
  if (!failed.ok()) {
    if (child != nullptr) ncclCommAbort(child);
    if (failed.code() == StatusCode::kAborted) return failed;
    if (failed.code() == StatusCode::kDeadlineExceeded) return TimedOut(what);
    abort(what + " failed");
    return failed;
  }
  if (child == nullptr) return std::unique_ptr<Communicator>();
  int child_rank = 0;
  int child_size = 0;
  ncclCommUserRank(child, &child_rank);
  ncclCommCount(child, &child_size);
  MEMCOORD_ASSIGN_OR_RETURN(auto impl, Wrap(child, device_));
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(std::move(impl), child_rank, child_size, device_, options()));
}

}  // namespace memcoord
