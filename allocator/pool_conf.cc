#include "allocator/pool_conf.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>

#include "common/bytes.h"

namespace memcoord {
namespace {

enum class Key {
  kLargeMapUnit,
  kThreadCache,
  kThreadCacheBlock,
  kDeviceReserve,
  kRemap,
  kGrowth,
  kFreeMarkerInterval,
  kThreadCacheFence,
  kThreadCacheIdleMisses,
  kMergeUnitEnds,
  kGrowToUnitEnd,
  kMarkWaits,
  kAddressRange,
  kLargeGrowStep,
};

struct KeySpec {
  std::string_view name;
  Key key;
  // Sizes and counts: the largest accepted (beyond it the value is surely a mistake); 0 for words.
  std::uint64_t max_value;
};

constexpr std::uint64_t kMaxMarkerIntervalUs = 10'000'000;  // 10 s: a marker then never matters

constexpr std::uint64_t kMaxIdleMisses = 1'000'000;  // a thread idle that long is idle at any setting

// The most address space one range may reserve: hundreds of times any device's memory (a larger value is a
// mistake in units).
constexpr std::uint64_t kMaxAddressRange = 64 * 1024 * kGiB;  // 64 TiB

constexpr std::array<KeySpec, 14> kKeys{{
    {"large_map_unit", Key::kLargeMapUnit, 64 * kGiB},
    {"thread_cache", Key::kThreadCache, kGiB},
    {"thread_cache_block", Key::kThreadCacheBlock, kGiB},
    {"device_reserve", Key::kDeviceReserve, 1ULL << 50},
    {"remap", Key::kRemap, 0},
    {"growth", Key::kGrowth, 0},
    {"free_marker_interval_us", Key::kFreeMarkerInterval, kMaxMarkerIntervalUs},
    {"thread_cache_fence", Key::kThreadCacheFence, 0},
    {"thread_cache_idle_misses", Key::kThreadCacheIdleMisses, kMaxIdleMisses},
    {"merge_unit_ends", Key::kMergeUnitEnds, 0},
    {"grow_to_unit_end", Key::kGrowToUnitEnd, 0},
    {"mark_waits", Key::kMarkWaits, 0},
    {"address_range", Key::kAddressRange, kMaxAddressRange},
    {"large_grow_step", Key::kLargeGrowStep, 64 * kGiB},
}};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status BadEntry(std::string_view entry, const std::string& why) {
  return InvalidArgument(fmt::format("alloc conf entry '{}': {}", entry, why));
}

Status ApplySize(const KeySpec& spec, std::string_view entry, std::string_view value, PoolOptions& out) {
  Result<std::uint64_t> bytes = ParseBytes(value);
  if (!bytes.ok()) return BadEntry(entry, std::string(bytes.status().message()));
  if (*bytes > spec.max_value) {
    return BadEntry(entry, fmt::format("{} is larger than the {} accepted for {}", FormatBytesBinary(*bytes),
                                       FormatBytesBinary(spec.max_value), spec.name));
  }
  switch (spec.key) {
    case Key::kLargeMapUnit:
      out.large_map_unit_bytes = *bytes;
      break;
    case Key::kThreadCache:
      out.thread_cache_bytes = *bytes;
      break;
    case Key::kThreadCacheBlock:
      out.thread_cache_block_bytes = *bytes;
      break;
    case Key::kDeviceReserve:
      out.device_reserve_bytes = *bytes;
      break;
    case Key::kAddressRange:
      out.address_range_bytes = *bytes;
      break;
    case Key::kLargeGrowStep:
      out.large_grow_step_bytes = *bytes;
      break;
    default:
      break;
  }
  return Status::Ok();
}

template <typename E>
using Words = std::array<std::pair<std::string_view, E>, 3>;  // a value's accepted spellings (empty: unused)

constexpr Words<RemapPolicy> kRemapWords{
    {{"under-pressure", RemapPolicy::kUnderPressure}, {"every-miss", RemapPolicy::kEveryMiss}, {}}};
constexpr Words<bool> kSwitchWords{{{"on", true}, {"off", false}, {}}};
constexpr Words<PoolGrowth> kGrowthWords{
    {{"auto", PoolGrowth::kAuto}, {"mapping", PoolGrowth::kMapping}, {"segments", PoolGrowth::kSegments}}};

template <typename E>
bool PickWord(std::string_view value, const Words<E>& words, E& out) {
  for (const auto& [word, picked] : words) {
    if (!word.empty() && value == word) {
      out = picked;
      return true;
    }
  }
  return false;
}

// A whole number (microseconds, or a count), decimal digits only.
Status ApplyWhole(const KeySpec& spec, std::string_view entry, std::string_view value, PoolOptions& out) {
  std::uint64_t n = 0;
  const char* const end = value.data() + value.size();
  const auto [stop, error] = std::from_chars(value.data(), end, n);  // digits only: no sign, no spaces
  const bool micros = spec.key == Key::kFreeMarkerInterval;
  if (error != std::errc() || stop != end || n > spec.max_value) {
    return BadEntry(entry, fmt::format("{} takes a whole number{} from 0 to {}", spec.name,
                                       micros ? " of microseconds" : "", spec.max_value));
  }
  if (micros) {
    out.large_free_marker_interval_us = static_cast<std::uint32_t>(n);
  } else {
    out.thread_cache_idle_misses = static_cast<std::uint32_t>(n);
  }
  return Status::Ok();
}

Status ApplyWord(const KeySpec& spec, std::string_view entry, std::string_view value, PoolOptions& out) {
  if (spec.key == Key::kRemap) {
    if (PickWord(value, kRemapWords, out.remap)) return Status::Ok();
    return BadEntry(entry, "remap accepts under-pressure or every-miss");
  }
  if (spec.key == Key::kThreadCacheFence) {
    if (PickWord(value, kSwitchWords, out.thread_cache_fence)) return Status::Ok();
    return BadEntry(entry, "thread_cache_fence accepts on or off");
  }
  if (spec.key == Key::kMergeUnitEnds) {
    if (PickWord(value, kSwitchWords, out.merge_unit_ends)) return Status::Ok();
    return BadEntry(entry, "merge_unit_ends accepts on or off");
  }
  if (spec.key == Key::kGrowToUnitEnd) {
    if (PickWord(value, kSwitchWords, out.grow_to_unit_end)) return Status::Ok();
    return BadEntry(entry, "grow_to_unit_end accepts on or off");
  }
  if (spec.key == Key::kMarkWaits) {
    if (PickWord(value, kSwitchWords, out.pack_waits_at_mark)) return Status::Ok();
    return BadEntry(entry, "mark_waits accepts on or off");
  }
  if (PickWord(value, kGrowthWords, out.growth)) return Status::Ok();
  return BadEntry(entry, "growth accepts auto, mapping or segments");
}

Status Apply(const KeySpec& spec, std::string_view entry, std::string_view value, PoolOptions& out) {
  switch (spec.key) {
    case Key::kRemap:
    case Key::kGrowth:
    case Key::kThreadCacheFence:
    case Key::kMergeUnitEnds:
    case Key::kGrowToUnitEnd:
    case Key::kMarkWaits:
      return ApplyWord(spec, entry, value, out);
    case Key::kFreeMarkerInterval:
    case Key::kThreadCacheIdleMisses:
      return ApplyWhole(spec, entry, value, out);
    default:
      return ApplySize(spec, entry, value, out);
  }
}

}  // namespace

std::string_view PoolConfKeys() {
  return "large_map_unit, thread_cache, thread_cache_block, device_reserve, remap, growth, "
         "free_marker_interval_us, thread_cache_fence, thread_cache_idle_misses, merge_unit_ends, "
         "grow_to_unit_end, mark_waits, address_range, large_grow_step";
}

Result<PoolOptions> ApplyPoolConf(std::string_view conf, PoolOptions base) {
  std::array<bool, kKeys.size()> seen{};
  while (!conf.empty()) {
    const std::size_t comma = conf.find(',');
    const std::string_view entry = Trim(conf.substr(0, comma));
    conf = comma == std::string_view::npos ? std::string_view() : conf.substr(comma + 1);
    if (entry.empty()) continue;  // "a:1,,b:2" and a trailing comma
    const std::size_t colon = entry.find(':');
    if (colon == std::string_view::npos) {
      return BadEntry(entry, fmt::format("entries are KEY:VALUE (keys: {})", PoolConfKeys()));
    }
    const std::string_view name = Trim(entry.substr(0, colon));
    const std::string_view value = Trim(entry.substr(colon + 1));
    std::size_t i = 0;
    while (i < kKeys.size() && kKeys[i].name != name) ++i;
    if (i == kKeys.size()) {
      return BadEntry(entry, fmt::format("unknown key '{}'; accepted keys: {}", name, PoolConfKeys()));
    }
    if (seen[i]) return BadEntry(entry, fmt::format("{} is given twice", name));
    seen[i] = true;
    if (value.empty()) return BadEntry(entry, fmt::format("{} has no value", name));
    MEMCOORD_RETURN_IF_ERROR(Apply(kKeys[i], entry, value, base));
  }
  return base;
}

}  // namespace memcoord
