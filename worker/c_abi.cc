// The C ABI (worker/memcoord.h) over one process-wide Worker. Every entry point catches everything: no
// exception crosses into C. g_mu guards the worker's creation and destruction; the worker and its pools
// are thread-safe themselves.
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "worker/memcoord.h"
#include "worker/worker.h"

namespace {

std::mutex g_mu;
std::unique_ptr<memcoord::Worker> g_worker;  // guarded by g_mu for creation/destruction
thread_local std::string t_last_error;

int Fail(const memcoord::Status& status) {
  t_last_error = status.ToString();
  return static_cast<int>(status.code());
}

int FailInternal(const char* what) {
  t_last_error = std::string("INTERNAL: ") + what;
  return static_cast<int>(memcoord::StatusCode::kInternal);
}

memcoord::Worker* Current() {
  std::lock_guard lock(g_mu);
  return g_worker.get();
}

memcoord::Result<memcoord::CachingPool*> PoolNamed(const char* name) {
  memcoord::Worker* worker = Current();
  if (worker == nullptr) return memcoord::FailedPrecondition("memcoord_init() has not been called");
  const std::string pool_name = name != nullptr ? name : "default";
  if (memcoord::CachingPool* pool = worker->pool(pool_name)) return pool;
  memcoord::PoolOptions options;
  options.name = pool_name;
  auto created = worker->create_pool(options);
  if (created.ok()) return created;
  // Another thread may have created it in between.
  if (memcoord::CachingPool* pool = worker->pool(pool_name)) return pool;
  return created.status();
}

}  // namespace

extern "C" {

int memcoord_init(void) {
  try {
    std::lock_guard lock(g_mu);
    if (g_worker) return 0;
    memcoord::WorkerOptions options;
    if (const char* backend = std::getenv("MEMCOORD_BACKEND"); backend != nullptr && *backend != '\0') {
      options.backend = backend;
    }
    auto worker = memcoord::Worker::init(options);
    if (!worker.ok()) return Fail(worker.status());
    g_worker = *std::move(worker);
    return 0;
  } catch (...) {
    return FailInternal("memcoord_init threw");
  }
}

void* memcoord_alloc(const char* pool, size_t bytes, uintptr_t stream) {
  try {
    auto p = PoolNamed(pool);
    if (!p.ok()) {
      Fail(p.status());
      return nullptr;
    }
    auto block = (*p)->allocate(bytes, stream);
    if (!block.ok()) {
      Fail(block.status());
      return nullptr;
    }
    return *block;
  } catch (...) {
    FailInternal("memcoord_alloc threw");
    return nullptr;
  }
}

int memcoord_free(const char* pool, void* ptr) {
  try {
    auto p = PoolNamed(pool);
    if (!p.ok()) return Fail(p.status());
    memcoord::Status status = (*p)->deallocate(ptr);
    return status.ok() ? 0 : Fail(status);
  } catch (...) {
    return FailInternal("memcoord_free threw");
  }
}

int memcoord_step_begin(void) {
  memcoord::Worker* worker = Current();
  if (worker == nullptr) return Fail(memcoord::FailedPrecondition("memcoord_init() has not been called"));
  worker->step_begin();
  return 0;
}

int memcoord_step_end(void) {
  try {
    memcoord::Worker* worker = Current();
    if (worker == nullptr) return Fail(memcoord::FailedPrecondition("memcoord_init() has not been called"));
    memcoord::Status status = worker->step_end();
    return status.ok() ? 0 : Fail(status);
  } catch (...) {
    return FailInternal("memcoord_step_end threw");
  }
}

int64_t memcoord_step(void) {
  memcoord::Worker* worker = Current();
  return worker == nullptr ? -1 : worker->step();
}

int memcoord_shutdown(void) {
  try {
    std::unique_ptr<memcoord::Worker> worker;
    {
      std::lock_guard lock(g_mu);
      worker = std::move(g_worker);
    }
    if (worker) worker->shutdown();
    return 0;
  } catch (...) {
    return FailInternal("memcoord_shutdown threw");
  }
}

const char* memcoord_last_error(void) { return t_last_error.c_str(); }

void* memcoord_torch_malloc(ptrdiff_t size, int /*device*/, void* stream) {
  if (Current() == nullptr && memcoord_init() != 0) return nullptr;
  if (size <= 0) {
    t_last_error = "INVALID_ARGUMENT: size must be positive";
    return nullptr;
  }
  return memcoord_alloc(nullptr, static_cast<size_t>(size), reinterpret_cast<uintptr_t>(stream));
}

void memcoord_torch_free(void* ptr, ptrdiff_t /*size*/, int /*device*/, void* /*stream*/) {
  (void)memcoord_free(nullptr, ptr);
}

}  // extern "C"
