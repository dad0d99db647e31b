// Expedited private membarrier (Linux membarrier(2)): one thread runs a full memory barrier on every running
// thread of this process. It lets a hot path's store-load pair go without a CPU fence when its rare
// counterpart pays for both sides with one membarrier() (asymmetric fences: OwnerGate, the C ABI's call
// guard). Registering is per process and survives fork().
#pragma once

namespace memcoord {

// True when this process is registered for MEMBARRIER_CMD_PRIVATE_EXPEDITED: tried once, on the first call
// from any thread (later calls are a load and a branch). Always false under ThreadSanitizer, which cannot see
// the barrier, and where the kernel lacks the command (old kernels, seccomp).
bool MembarrierRegistered() noexcept;

// Runs a full barrier on every running thread of the process. REQUIRES: MembarrierRegistered().
void MembarrierEveryThread() noexcept;

}  // namespace memcoord
