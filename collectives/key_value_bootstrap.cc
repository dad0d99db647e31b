#include "collectives/key_value_bootstrap.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace memcoord {
namespace {

Status KeyNotSeen(std::string_view key, std::chrono::milliseconds timeout) {
  return DeadlineExceeded(
      fmt::format("bootstrap key '{}' did not appear within {} ms: the rank that publishes "
                  "it has not started or died",
                  key, timeout.count()));
}

Status DifferentValue(std::string_view key) {
  return AlreadyExists(
      fmt::format("bootstrap key '{}' already holds a different value (keys are written once)", key));
}

// Reads a whole file; false when it does not exist (yet).
bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return true;
}

}  // namespace

Status InProcessKeyValueBootstrap::put(std::string_view key, std::string_view value) {
  if (key.empty()) return InvalidArgument("bootstrap put: the key is empty");
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = values_.find(key);
    if (it != values_.end()) return it->second == value ? Status::Ok() : DifferentValue(key);
    values_.emplace(std::string(key), std::string(value));
  }
  changed_.notify_all();
  return Status::Ok();
}

Result<std::string> InProcessKeyValueBootstrap::get(std::string_view key, std::chrono::milliseconds timeout) {
  if (key.empty()) return InvalidArgument("bootstrap get: the key is empty");
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto it = values_.find(key);
    if (it != values_.end()) return it->second;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout &&
        values_.find(key) == values_.end()) {
      return KeyNotSeen(key, timeout);
    }
  }
}

FileKeyValueBootstrap::FileKeyValueBootstrap(std::string directory) : directory_(std::move(directory)) {}

std::string FileKeyValueBootstrap::PathOf(std::string_view key) const {
  std::string name;
  for (char c : key) {
    if (c == '/') {
      name += "%2F";
    } else if (c == '%') {
      name += "%25";
    } else {
      name += c;
    }
  }
  return directory_ + "/" + name;
}

Status FileKeyValueBootstrap::put(std::string_view key, std::string_view value) {
  if (key.empty()) return InvalidArgument("bootstrap put: the key is empty");
  const std::string path = PathOf(key);
  std::string existing;
  if (ReadFile(path, &existing)) return existing == value ? Status::Ok() : DifferentValue(key);
  static std::atomic<unsigned> sequence{0};
  const std::string temporary = fmt::format("{}.tmp.{}.{}", path, ::getpid(), sequence.fetch_add(1));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(value.data(), static_cast<std::streamsize>(value.size()));
    out.close();
    if (!out) {
      return Unavailable(
          fmt::format("bootstrap put '{}': cannot write {}: {}", key, temporary, std::strerror(errno)));
    }
  }
  // link() fails when the key exists, so two writers never overwrite each other's value.
  if (::link(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    if (error == EEXIST && ReadFile(path, &existing))
      return existing == value ? Status::Ok() : DifferentValue(key);
    return Unavailable(
        fmt::format("bootstrap put '{}': cannot create {}: {}", key, path, std::strerror(error)));
  }
  ::unlink(temporary.c_str());
  return Status::Ok();
}

Result<std::string> FileKeyValueBootstrap::get(std::string_view key, std::chrono::milliseconds timeout) {
  if (key.empty()) return InvalidArgument("bootstrap get: the key is empty");
  const std::string path = PathOf(key);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string value;
  for (;;) {
    if (ReadFile(path, &value)) return value;
    if (std::chrono::steady_clock::now() >= deadline) return KeyNotSeen(key, timeout);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace memcoord
