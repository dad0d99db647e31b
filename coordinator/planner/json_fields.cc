#include "coordinator/planner/json_fields.h"

#include <algorithm>

#include "common/bytes.h"

namespace memcoord::planner {
namespace {

std::string FieldName(const std::string& where, const std::string& key) {
  return where.empty() ? key : where + "." + key;
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
  std::int64_t value = 0;
  if (it->is_number_integer()) {
    value = it->get<std::int64_t>();
  } else if (it->is_number_float() && it->get<double>() == static_cast<double>(it->get<std::int64_t>())) {
    value = it->get<std::int64_t>();
  } else {
    return InvalidArgument(field + " must be an integer, got " + it->dump());
  }
  if (value < min_value || value > max_value) {
    return InvalidArgument(field + " must be between " + std::to_string(min_value) + " and " +
                           std::to_string(max_value) + ", got " + std::to_string(value));
  }
  return value;
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
      return InvalidArgument((where.empty() ? std::string("top level") : where) + ": unknown field \"" +
                             it.key() + "\"; accepted: " + JoinNames(known));
    }
  }
  return Status::Ok();
}

}  // namespace memcoord::planner
