// On a real GPU (label gpu; skips without one): the CUDA backends report the device's UUID as nvidia-smi
// does ("GPU-" + 36 characters, and one of the UUIDs nvidia-smi lists when it is installed), and a worker on
// that GPU carries it to the coordinator's /metrics as the `gpu_uuid` label. Run on the H200
// (bench/worker/run_on_gpu.sh).
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <regex>
#include <string>

#include "allocator/backend_factory.h"
#include "allocator/gpu_uuid.h"
#include "coordinator/service/coordinator_server.h"
#include "tests/coordinator/test_support.h"
#include "worker/worker.h"

namespace memcoord {
namespace {

using std::chrono::milliseconds;

#define SKIP_WITHOUT_GPU() \
  if (!GpuAvailable()) GTEST_SKIP() << "no usable CUDA device (this test needs a GPU)"

const std::regex kUuidPattern("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");

// What `nvidia-smi --query-gpu=uuid` prints (one UUID a line); empty when nvidia-smi is not installed.
std::string NvidiaSmiUuids() {
  std::FILE* pipe = ::popen("nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null", "r");
  if (pipe == nullptr) return {};
  std::string out;
  char buffer[256];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
  ::pclose(pipe);
  return out;
}

TEST(GpuUuidOnCuda, BothCudaBackendsReportTheDevicesUuidAsNvidiaSmiPrintsIt) {
  SKIP_WITHOUT_GPU();
  std::string seen;
  for (const char* kind : {"cuda", "cuda-vmm"}) {
    SCOPED_TRACE(kind);
    auto backend = MakeBackend(kind, {});
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    const std::string uuid = (*backend)->device_info().uuid;
    EXPECT_EQ(uuid.size(), kGpuUuidTextLength);
    EXPECT_EQ(uuid.substr(0, 4), "GPU-");
    EXPECT_TRUE(std::regex_match(uuid, kUuidPattern)) << uuid;
    if (!seen.empty()) {
      EXPECT_EQ(uuid, seen);  // one device, one UUID, whichever backend reads it
    }
    seen = uuid;
    std::printf("%s backend, device 0: %s\n", kind, uuid.c_str());
  }
  const std::string listed = NvidiaSmiUuids();
  if (listed.empty()) {
    std::printf("nvidia-smi is not installed here: the UUID was not compared with its list\n");
  } else {
    EXPECT_NE(listed.find(seen), std::string::npos) << "nvidia-smi lists:\n" << listed;
  }
}

TEST(GpuUuidOnCuda, AWorkerOnTheGpuCarriesItsUuidToTheMetricsLabel) {
  SKIP_WITHOUT_GPU();
  coordinator::CoordinatorOptions server_options;
  server_options.metrics_listen = "127.0.0.1:0";
  auto server = coordinator::CoordinatorServer::Start(server_options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  WorkerOptions options;
  options.coordinator = (*server)->address();
  options.backend = "cuda-vmm";
  options.report_interval = milliseconds(50);
  options.topology = Topology{0, 0, 1, "test"};
  auto worker = Worker::init(options);
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  const std::string uuid = (*worker)->backend().device_info().uuid;
  ASSERT_TRUE(std::regex_match(uuid, kUuidPattern)) << uuid;
  ASSERT_TRUE(
      testing::WaitFor([&] { return (*server)->snapshot().workers.size() == 1; }, milliseconds(5000)));

  httplib::Client client("127.0.0.1", (*server)->metrics_port());
  client.set_read_timeout(5, 0);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("gpu_uuid=\"" + uuid + "\"} 1\n"), std::string::npos) << res->body;
  std::printf("/metrics: memcoord_worker_live{...,gpu_uuid=\"%s\"} 1\n", uuid.c_str());
}

}  // namespace
}  // namespace memcoord
