#include "common/bytes.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace memcoord {
namespace {

struct Unit {
  std::string_view name;
  std::uint64_t multiplier;
};

constexpr std::array<Unit, 10> kUnits = {{
    {"b", 1},
    {"kb", 1000ULL},
    {"mb", 1000ULL * 1000},
    {"gb", 1000ULL * 1000 * 1000},
    {"tb", 1000ULL * 1000 * 1000 * 1000},
    {"kib", kKiB},
    {"mib", kMiB},
    {"gib", kGiB},
    {"tib", kGiB * 1024},
    {"", 1},
}};

std::string Lower(std::string_view s) {
  std::string out;
  for (char c : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Status Bad(std::string_view text, std::string_view why) {
  return InvalidArgument(
      fmt::format("invalid size '{}': {}; accepted: a non-negative number with an optional "
                  "unit B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. 123, 4KiB, 80GB)",
                  text, why));
}

}  // namespace

Result<std::uint64_t> ParseBytes(std::string_view text) {
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty()) return Bad(text, "empty");
  if (s.front() == '-') return Bad(text, "negative");
  std::size_t number_end = 0;
  while (number_end < s.size() &&
         (std::isdigit(static_cast<unsigned char>(s[number_end])) || s[number_end] == '.')) {
    ++number_end;
  }
  if (number_end == 0) return Bad(text, "no number");
  std::string_view number = s.substr(0, number_end);
  std::string_view unit_text = s.substr(number_end);
  while (!unit_text.empty() && std::isspace(static_cast<unsigned char>(unit_text.front()))) {
    unit_text.remove_prefix(1);
  }
  const std::string unit = Lower(unit_text);
  std::uint64_t multiplier = 0;
  for (const Unit& u : kUnits) {
    if (u.name == unit) multiplier = u.multiplier;
  }
  if (multiplier == 0) return Bad(text, fmt::format("unknown unit '{}'", unit_text));

  if (number.find('.') == std::string_view::npos) {
    std::uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec == std::errc::result_out_of_range) return Bad(text, "too large");
    if (ec != std::errc() || ptr != number.data() + number.size()) return Bad(text, "not a number");
    if (value > std::numeric_limits<std::uint64_t>::max() / multiplier) return Bad(text, "too large");
    return value * multiplier;
  }
  double value = 0;
  auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || ptr != number.data() + number.size()) return Bad(text, "not a number");
  const double bytes = std::round(value * static_cast<double>(multiplier));
  if (!(bytes < 1.8e19)) return Bad(text, "too large");
  return static_cast<std::uint64_t>(bytes);
}

namespace {

// "512 B", "15.78 GB": two decimals in the largest unit that keeps the value at or above 1.
std::string FormatInUnits(std::uint64_t bytes, double base, const std::array<std::string_view, 5>& names) {
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= base && unit + 1 < names.size()) {
    value /= base;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.2f} {}", value, names[unit]);
}

}  // namespace

std::string FormatBytes(std::uint64_t bytes) {
  return FormatInUnits(bytes, 1000.0, {"B", "KB", "MB", "GB", "TB"});
}

std::string FormatBytesBinary(std::uint64_t bytes) {
  return FormatInUnits(bytes, 1024.0, {"B", "KiB", "MiB", "GiB", "TiB"});
}

}  // namespace memcoord
