#include "collectives/mpi_rendezvous.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "collectives/mpi_communicator.h"

namespace memcoord {
namespace {

// Strings travel as int64 words: a length round, then the padded bytes.
class MpiRendezvous final : public NcclRendezvous {
 public:
  explicit MpiRendezvous(std::unique_ptr<MpiCommunicator> comm) : comm_(std::move(comm)) {}

  int rank() const override { return comm_->rank(); }
  int size() const override { return comm_->size(); }

  Result<std::vector<std::string>> allgather(std::string_view mine, std::chrono::milliseconds) override {
    const auto n = static_cast<std::size_t>(comm_->size());
    std::int64_t length = static_cast<std::int64_t>(mine.size());
    std::vector<std::int64_t> lengths(n);
    MEMCOORD_RETURN_IF_ERROR(comm_->allgather(&length, lengths.data(), 1, DataType::kInt64));
    const std::int64_t longest = *std::max_element(lengths.begin(), lengths.end());
    const std::size_t words = static_cast<std::size_t>(longest + 7) / 8;
    std::vector<std::int64_t> send(std::max<std::size_t>(words, 1), 0);
    std::memcpy(send.data(), mine.data(), mine.size());
    std::vector<std::int64_t> all(std::max<std::size_t>(words * n, 1));
    MEMCOORD_RETURN_IF_ERROR(comm_->allgather(send.data(), all.data(), words, DataType::kInt64));
    std::vector<std::string> out(n);
    for (std::size_t r = 0; r < n; ++r) {
      out[r].assign(reinterpret_cast<const char*>(all.data() + r * words),
                    static_cast<std::size_t>(lengths[r]));
    }
    return out;
  }

  Result<std::string> broadcast(std::string_view value, int root, std::chrono::milliseconds) override {
    std::int64_t length = static_cast<std::int64_t>(value.size());
    MEMCOORD_RETURN_IF_ERROR(comm_->broadcast(&length, 1, DataType::kInt64, root));
    const std::size_t words = static_cast<std::size_t>(length + 7) / 8;
    std::vector<std::int64_t> buffer(std::max<std::size_t>(words, 1), 0);
    if (comm_->rank() == root) std::memcpy(buffer.data(), value.data(), value.size());
    MEMCOORD_RETURN_IF_ERROR(comm_->broadcast(buffer.data(), words, DataType::kInt64, root));
    return std::string(reinterpret_cast<const char*>(buffer.data()), static_cast<std::size_t>(length));
  }

 private:
  std::unique_ptr<MpiCommunicator> comm_;
};

}  // namespace

Result<std::unique_ptr<NcclRendezvous>> MakeMpiRendezvous(MPI_Comm parent,
                                                          std::chrono::milliseconds timeout) {
  MEMCOORD_ASSIGN_OR_RETURN(auto comm, MpiCommunicator::Create(parent, {timeout, false}));
  return std::unique_ptr<NcclRendezvous>(std::make_unique<MpiRendezvous>(std::move(comm)));
}

}  // namespace memcoord
