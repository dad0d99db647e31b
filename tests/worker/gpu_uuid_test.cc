// FormatGpuUuid (allocator/gpu_uuid.h): 16 bytes as nvidia-smi and dcgm-exporter write a GPU's UUID, and the
// backends without a GPU report none.
#include "allocator/gpu_uuid.h"

#include <gtest/gtest.h>

#include "allocator/host_backend.h"
#include "allocator/virtual_backend.h"

namespace memcoord {
namespace {

TEST(GpuUuid, SixteenBytesBecomeNvidiaSmisText) {
  // cudaDeviceProp::uuid.bytes, in order, of a GPU that nvidia-smi -L would list as
  // "GPU-b8ea3855-276c-c9cb-b366-c6fa655957c5" (nvidia-smi prints the bytes in memory order, not as a
  // little-endian GUID).
  const std::array<std::uint8_t, kGpuUuidBytes> bytes = {0xb8, 0xea, 0x38, 0x55, 0x27, 0x6c, 0xc9, 0xcb,
                                                         0xb3, 0x66, 0xc6, 0xfa, 0x65, 0x59, 0x57, 0xc5};
  EXPECT_EQ(FormatGpuUuid(bytes), "GPU-b8ea3855-276c-c9cb-b366-c6fa655957c5");
}

TEST(GpuUuid, EveryByteIsTwoLowercaseDigitsWithLeadingZerosInTheEightFourFourFourTwelveGrouping) {
  std::array<std::uint8_t, kGpuUuidBytes> bytes{};
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 17);  // 00 11 .. ff
  const std::string text = FormatGpuUuid(bytes);
  EXPECT_EQ(text, "GPU-00112233-4455-6677-8899-aabbccddeeff");
  EXPECT_EQ(text.size(), kGpuUuidTextLength);
  EXPECT_EQ(FormatGpuUuid({}), "GPU-00000000-0000-0000-0000-000000000000");
  bytes.fill(0x0f);
  EXPECT_EQ(FormatGpuUuid(bytes), "GPU-0f0f0f0f-0f0f-0f0f-0f0f-0f0f0f0f0f0f");
}

TEST(GpuUuid, BackendsWithoutAGpuReportNone) {
  HostBackend host(64ull << 20);
  VirtualBackend virt;
  EXPECT_EQ(host.device_info().uuid, "");
  EXPECT_EQ(virt.device_info().uuid, "");
}

}  // namespace
}  // namespace memcoord
