// Fuzzes the coordinator's request handling in process, without a server: worker messages on Attach
// sessions (WorkerEvents, as the Attach reactor feeds them) interleaved with the admin and bootstrap RPCs
// (the handlers of rpc_handlers.h and QuotaBroker::set_quota), each message parsed from arbitrary bytes.
//
// Input: records of [op][session][length, 2 bytes little-endian][length bytes of a serialized message].
//   op % 9: 0 a WorkerMessage on session `session % 4`; 1 that session ends (broken when session >= 128) and
//   a new one takes its slot; 2 GetCluster; 3 Trim; 4 SetQuota; 5 Put; 6 Get; 7 Plan; 8 Watch (one snapshot:
//   the writer then reports the stream closed, so it never sleeps).
// Waits are cut short so an input runs in milliseconds: Trim's deadline is 1 ms, Get never waits, and the
// fake sessions refuse sends during SetQuota (a worker that stopped reading) so it does not wait for acks.
// After the input every session ends, as when the server stops: no session, no live rank may remain.
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "coordinator/service/quota_broker.h"
#include "coordinator/service/rpc_handlers.h"
#include "coordinator/service/service_state.h"
#include "coordinator/service/worker_events.h"

namespace memcoord::coordinator {
namespace {

// A session whose stream is a queue nobody reads; `accepting` false models a worker that stopped reading.
class FakeSession final : public WorkerSession {
 public:
  bool send(const v1::CoordinatorMessage&) override {
    if (accepting) ++sent;
    return accepting;
  }
  void cancel() override { cancelled = true; }

  bool accepting = true;
  bool cancelled = false;
  std::size_t sent = 0;
};

constexpr std::size_t kSessions = 4;

class Harness {
 public:
  Harness() : state_(CoordinatorOptions{}), quotas_(state_), events_(state_, quotas_) {
    for (auto& s : sessions_) s = std::make_unique<FakeSession>();
  }

  void run(const std::uint8_t* data, std::size_t size) {
    while (size >= 4) {
      const std::uint8_t op = data[0] % 9, who = data[1];
      const std::size_t length = std::min<std::size_t>(data[2] | (std::size_t{data[3]} << 8), size - 4);
      step(op, who, data + 4, static_cast<int>(length));
      data += 4 + length;
      size -= 4 + length;
    }
    for (auto& s : sessions_) events_.on_end(*s, /*broken=*/true, Status::Ok());
    if (state_.sessions.size() != 0) std::abort();           // a session outlived its end
    if (!state_.cluster.live_ranks().empty()) std::abort();  // a rank still live without a session
  }

 private:
  void end_session(FakeSession& session, bool broken, const Status& result) {
    events_.on_end(session, broken, result);
    // The reactor is deleted by gRPC after OnDone; a reconnecting worker gets a new one.
    for (auto& s : sessions_) {
      if (s.get() == &session) s = std::make_unique<FakeSession>();
    }
  }

  void step(std::uint8_t op, std::uint8_t who, const std::uint8_t* payload, int length) {
    FakeSession& session = *sessions_[who % kSessions];
    switch (op) {
      case 0: {
        v1::WorkerMessage message;
        if (!message.ParseFromArray(payload, length)) return;
        Status result = events_.on_message(session, message);
        if (!result.ok()) end_session(session, /*broken=*/false, result);
        return;
      }
      case 1:
        end_session(session, /*broken=*/who >= 128, Status::Ok());
        return;
      case 2: {
        v1::ClusterSnapshot reply;
        (void)HandleGetCluster(state_, &reply);
        return;
      }
      case 3: {
        v1::TrimRequest request;
        if (!request.ParseFromArray(payload, length)) return;
        request.set_deadline_ms(1);
        v1::TrimResponse reply;
        (void)HandleTrim(state_, request, &reply);
        return;
      }
      case 4: {
        v1::SetQuotaRequest request;
        if (!request.ParseFromArray(payload, length)) return;
        for (auto& s : sessions_) s->accepting = false;
        v1::SetQuotaResponse reply;
        (void)quotas_.set_quota(request, &reply);
        for (auto& s : sessions_) s->accepting = true;
        return;
      }
      case 5: {
        v1::PutRequest request;
        if (!request.ParseFromArray(payload, length)) return;
        (void)HandlePut(state_, request);
        return;
      }
      case 6: {
        v1::GetRequest request;
        if (!request.ParseFromArray(payload, length)) return;
        request.set_wait_ms(0);
        v1::GetResponse reply;
        (void)HandleGet(state_, request, &reply, [] { return false; });
        return;
      }
      case 7: {
        v1::PlanRequest request;
        if (!request.ParseFromArray(payload, length)) return;
        v1::PlanReply reply;
        (void)HandlePlan(state_, request, &reply);
        return;
      }
      case 8: {
        v1::WatchRequest request;
        if (!request.ParseFromArray(payload, length)) return;
        int written = 0;
        (void)HandleWatch(
            state_, request,
            [&written](const v1::ClusterSnapshot&) {
              ++written;
              return false;
            },
            [] { return false; });
        if (written != 1) std::abort();  // a watcher gets a snapshot at once, before any wait
        return;
      }
    }
  }

  ServiceState state_;
  QuotaBroker quotas_;
  WorkerEvents events_;
  std::array<std::unique_ptr<FakeSession>, kSessions> sessions_;
};

}  // namespace
}  // namespace memcoord::coordinator

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  google::protobuf::SetLogHandler(nullptr);  // parse errors of fuzzed bytes are expected, not news
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  memcoord::coordinator::Harness harness;
  harness.run(data, size);
  return 0;
}
