// Small helpers that read typed fields from a JSON object and turn every mismatch into an
// INVALID_ARGUMENT status naming the field and the accepted form, so parsers never throw.
// `where` prefixes the field path in messages ("models[1].batch"). Stateless; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace memcoord::planner {

// Field `key` as an integer in [min_value, max_value]; `fallback` when absent (NOT_FOUND-free). A JSON
// float holding a whole number is accepted (8.0 is 8). Anything else is INVALID_ARGUMENT naming the field,
// the value and the range: fractions, strings, NaN, infinities and numbers beyond int64 (1e30, 9.3e18).
Result<std::int64_t> ReadInt(const nlohmann::json& object, const std::string& where, const std::string& key,
                             std::optional<std::int64_t> fallback, std::int64_t min_value,
                             std::int64_t max_value);

// Field `key` as a string; when `accepted` is non-empty the value must be one of them.
Result<std::string> ReadString(const nlohmann::json& object, const std::string& where, const std::string& key,
                               std::optional<std::string> fallback,
                               const std::vector<std::string>& accepted = {});

Result<bool> ReadBool(const nlohmann::json& object, const std::string& where, const std::string& key,
                      bool fallback);

// Field `key` as bytes: a non-negative integer or a size string ("80GB", "24GiB").
Result<std::uint64_t> ReadBytes(const nlohmann::json& object, const std::string& where,
                                const std::string& key, std::optional<std::uint64_t> fallback);

// Fails naming the first key of `object` that is not in `known` (catches typos such as "capcity").
Status CheckKnownKeys(const nlohmann::json& object, const std::string& where,
                      const std::vector<std::string>& known);

// `text` parsed as JSON; otherwise INVALID_ARGUMENT "<what> is not valid JSON (<the parser's reason, with
// the position>); expected <expected>". Numbers beyond a double (1e400) are refused here, by name, and so is
// nesting deeper than kMaxJsonDepth (nothing memcoord reads nests past 4; printing a value nested tens of
// thousands deep recurses once per level and overflows the stack).
inline constexpr std::size_t kMaxJsonDepth = 64;
Result<nlohmann::json> ParseJson(std::string_view text, const std::string& what, const std::string& expected);

// How deep arrays and objects nest in `text` (0 for a scalar), strings skipped; one pass, no parse.
std::size_t JsonNestingDepth(std::string_view text);

// `value` as compact JSON for a message, cut to about 80 characters ("... (N bytes)" after).
std::string ShortJson(const nlohmann::json& value);

// The whole file at `path`; INVALID_ARGUMENT "cannot read <what> \"<path>\"" when it cannot be opened.
Result<std::string> ReadTextFile(const std::string& path, const std::string& what);

// "a, b, c" for messages.
std::string JoinNames(const std::vector<std::string>& names);

}  // namespace memcoord::planner
