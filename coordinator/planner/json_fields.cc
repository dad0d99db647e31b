#include "coordinator/planner/json_fields.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/bytes.h"
#include "common/message_text.h"

namespace memcoord::planner {
namespace {

std::string FieldName(const std::string& where, const std::string& key) {
  return where.empty() ? key : where + "." + key;
}

// The JSON number as an int64 when it is a whole number inside int64's range; nullopt for anything else
// (not a number, a fraction, NaN, an infinity, beyond -2^63..2^63-1). A double is converted only after
// that check: converting one outside int64's range is undefined behaviour.
std::optional<std::int64_t> WholeInt64(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (!v.is_number_float()) return std::nullopt;
  const double d = v.get<double>();
  constexpr double kTwo63 = 9223372036854775808.0;         // exact in a double
  if (!(d >= -kTwo63 && d < kTwo63)) return std::nullopt;  // also NaN and the infinities
  if (d != std::trunc(d)) return std::nullopt;
  return static_cast<std::int64_t>(d);
}

// The value as a message shows it; JSON has no text for NaN or the infinities (dump() says null).
std::string ValueText(const nlohmann::json& v) {
  if (v.is_number_float() && !std::isfinite(v.get<double>())) {
    const double d = v.get<double>();
    return std::string(std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf")) + " (not a finite number)";
  }
  return ShortJson(v);
}

}  // namespace

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

Result<std::int64_t> ReadInt(const nlohmann::json& object, const std::string& where, const std::string& key,
                             std::optional<std::int64_t> fallback, std::int64_t min_value,
                             std::int64_t max_value) {
  const std::string field = FieldName(where, key);
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    if (fallback) return *fallback;
    return InvalidArgument(field + " is required (an integer >= " + std::to_string(min_value) + ")");
  }
  const std::string range = std::to_string(min_value) + " and " + std::to_string(max_value);
  const std::optional<std::int64_t> value = WholeInt64(*it);
  if (!value) {
    if (it->is_number_unsigned())
      return InvalidArgument(field + " must be between " + range + ", got " + it->dump());
    return InvalidArgument(field + " must be a whole number between " + range + ", got " + ValueText(*it));
  }
  if (*value < min_value || *value > max_value) {
    return InvalidArgument(field + " must be between " + range + ", got " + std::to_string(*value));
  }
  return *value;
}

Result<std::string> ReadString(const nlohmann::json& object, const std::string& where, const std::string& key,
                               std::optional<std::string> fallback,
                               const std::vector<std::string>& accepted) {
  const std::string field = FieldName(where, key);
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    if (fallback) return *fallback;
    return InvalidArgument(field + " is required" +
                           (accepted.empty() ? std::string() : " (one of: " + JoinNames(accepted) + ")"));
  }
  if (!it->is_string()) return InvalidArgument(field + " must be a string, got " + it->dump());
  std::string value = it->get<std::string>();
  if (!accepted.empty() && std::find(accepted.begin(), accepted.end(), value) == accepted.end()) {
    return InvalidArgument(field + " \"" + value + "\" is not accepted; accepted: " + JoinNames(accepted));
  }
  return value;
}

Result<bool> ReadBool(const nlohmann::json& object, const std::string& where, const std::string& key,
                      bool fallback) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    return InvalidArgument(FieldName(where, key) + " must be true or false, got " + it->dump());
  }
  return it->get<bool>();
}

Result<std::uint64_t> ReadBytes(const nlohmann::json& object, const std::string& where,
                                const std::string& key, std::optional<std::uint64_t> fallback) {
  const std::string field = FieldName(where, key);
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    if (fallback) return *fallback;
    return InvalidArgument(field + " is required (bytes: 123, \"24GiB\", \"80GB\")");
  }
  if (it->is_number_unsigned()) return it->get<std::uint64_t>();
  if (it->is_number_integer() || it->is_number_float()) {
    return InvalidArgument(field + " must be a non-negative size (123, \"24GiB\", \"80GB\"), got " +
                           it->dump());
  }
  if (!it->is_string()) {
    return InvalidArgument(field + " must be a size (123, \"24GiB\", \"80GB\"), got " + it->dump());
  }
  Result<std::uint64_t> bytes = ParseBytes(it->get<std::string>());
  if (!bytes.ok()) return bytes.status().WithContext(field + ": ");
  return *bytes;
}

Status CheckKnownKeys(const nlohmann::json& object, const std::string& where,
                      const std::vector<std::string>& known) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
      const std::string key = ShortForMessage(it.key());
      return InvalidArgument((where.empty() ? std::string("top level") : where) + ": unknown field \"" + key +
                             "\"; accepted: " + JoinNames(known));
    }
  }
  return Status::Ok();
}

std::size_t JsonNestingDepth(std::string_view text) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::string ShortJson(const nlohmann::json& value) { return ShortForMessage(value.dump()); }

Result<nlohmann::json> ParseJson(std::string_view text, const std::string& what,
                                 const std::string& expected) {
  if (const std::size_t depth = JsonNestingDepth(text); depth > kMaxJsonDepth) {
    return InvalidArgument(what + " nests arrays and objects " + std::to_string(depth) +
                           " levels deep; at most " + std::to_string(kMaxJsonDepth) +
                           " are accepted; expected " + expected);
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // "[json.exception.out_of_range.406] number overflow parsing '1e400'": keep the reason, drop the tag.
    std::string reason = e.what();
    if (const std::size_t tag_end = reason.find("] "); tag_end != std::string::npos)
      reason.erase(0, tag_end + 2);
    return InvalidArgument(what + " is not valid JSON (" + reason + "); expected " + expected);
  }
}

Result<std::string> ReadTextFile(const std::string& path, const std::string& what) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return InvalidArgument("cannot read " + what + " \"" + path + "\": it is a directory");
  }
  std::ifstream in(path);
  if (!in) return InvalidArgument("cannot read " + what + " \"" + path + "\"");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace memcoord::planner
