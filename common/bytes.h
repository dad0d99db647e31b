// Byte sizes as people write them: "123", "4KiB", "2GiB", "80GB", "1.5GB". Decimal units (KB, MB, GB, TB)
// are powers of 1000 and binary units (KiB, MiB, GiB, TiB) powers of 1024, as on GPU datasheets and
// nvidia-smi respectively; units are case-insensitive ("80gb"), "B" alone means bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace memcoord {

// Parses a non-negative size. Errors name the text and the accepted forms; negative, empty, overflowing
// or unit-less garbage input is INVALID_ARGUMENT.
Result<std::uint64_t> ParseBytes(std::string_view text);

// "15.78 GB" style (decimal, 2 decimals) for tables; FormatBytesBinary gives "14.69 GiB".
std::string FormatBytes(std::uint64_t bytes);
std::string FormatBytesBinary(std::uint64_t bytes);

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;
constexpr std::uint64_t kGiB = 1024 * kMiB;

}  // namespace memcoord
