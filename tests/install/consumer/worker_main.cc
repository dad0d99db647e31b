// The C++ worker runtime from an installed memcoord: a Worker on the host backend, a pool, one block.
#include <cstdio>
#include <cstring>

#include "worker/worker.h"

int main() {
  memcoord::WorkerOptions options;
  options.backend = "host";
  auto worker = memcoord::Worker::init(options);
  if (!worker.ok()) {
    std::fprintf(stderr, "Worker::init failed: %s\n", worker.status().ToString().c_str());
    return 1;
  }
  memcoord::PoolOptions pool_options;
  pool_options.name = "consumer";
  auto pool = (*worker)->create_pool(pool_options);
  if (!pool.ok()) {
    std::fprintf(stderr, "create_pool failed: %s\n", pool.status().ToString().c_str());
    return 1;
  }
  auto block = (*pool)->allocate(4096, 0);
  if (!block.ok()) {
    std::fprintf(stderr, "allocate failed: %s\n", block.status().ToString().c_str());
    return 1;
  }
  std::memset(*block, 1, 4096);
  if (!(*pool)->deallocate(*block).ok()) return 1;
  (*worker)->shutdown();
  std::printf(
      "consumer_worker: a memcoord::Worker made a pool and served a block from the installed library\n");
  return 0;
}
