#include "collectives/nccl_rendezvous.h"

#include <fmt/format.h>

namespace memcoord {
namespace {

class KeyValueRendezvous final : public NcclRendezvous {
 public:
  KeyValueRendezvous(KeyValueBootstrap& store, std::string prefix, int rank, int size)
      : store_(store), prefix_(std::move(prefix)), rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Result<std::vector<std::string>> allgather(std::string_view mine,
                                             std::chrono::milliseconds timeout) override {
    const int round = round_++;
    MEMCOORD_RETURN_IF_ERROR(store_.put(Key(round, rank_), mine));
    std::vector<std::string> all(static_cast<std::size_t>(size_));
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (int r = 0; r < size_; ++r) {
      MEMCOORD_ASSIGN_OR_RETURN(all[static_cast<std::size_t>(r)], store_.get(Key(round, r), Left(deadline)));
    }
    return all;
  }

  Result<std::string> broadcast(std::string_view value, int root,
                                std::chrono::milliseconds timeout) override {
    const int round = round_++;
    if (rank_ == root) {
      MEMCOORD_RETURN_IF_ERROR(store_.put(Key(round, root), value));
      return std::string(value);
    }
    return store_.get(Key(round, root), timeout);
  }

 private:
  std::string Key(int round, int rank) const { return fmt::format("{}/{}/{}", prefix_, round, rank); }
  static std::chrono::milliseconds Left(std::chrono::steady_clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return left.count() > 0 ? left : std::chrono::milliseconds(0);
  }

  KeyValueBootstrap& store_;
  const std::string prefix_;
  const int rank_;
  const int size_;
  int round_ = 0;
};

}  // namespace

std::unique_ptr<NcclRendezvous> MakeKeyValueRendezvous(KeyValueBootstrap& store, std::string prefix, int rank,
                                                       int size) {
  return std::make_unique<KeyValueRendezvous>(store, std::move(prefix), rank, size);
}

}  // namespace memcoord
