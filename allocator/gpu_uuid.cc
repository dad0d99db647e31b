#include "allocator/gpu_uuid.h"

namespace memcoord {

std::string FormatGpuUuid(const std::array<std::uint8_t, kGpuUuidBytes>& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "GPU-";
  out.reserve(kGpuUuidTextLength);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';  // 8-4-4-4-12 hex digits
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 0xf];
  }
  return out;
}

}  // namespace memcoord
