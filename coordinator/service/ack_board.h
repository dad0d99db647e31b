// AckBoard: where a command sent to several ranks waits for their acks. The caller opens an entry for a
// command id and the ranks it was sent to; session threads deliver acks; a rank that dies is struck off at
// once, so a wait ends as soon as every rank either acked or is gone, or at the deadline, never later.
//
// Command latency: a command the worker applies on receipt (`immediate`: a quota, a trim --now) measures
// each rank's round trip: ack received - sent - the worker's own duration_ms. The board keeps a smoothed
// value per rank (round_trip), which the trim orchestrator uses to pick a step the command reaches in time.
// Acks are matched by command id and rank. Ids are unique across coordinator restarts too (a random base per
// process, service_state.h), so an ack a worker carried over from an earlier coordinator matches nothing
// here and is ignored.
// Thread safety: every method is thread-safe; wait() blocks only its caller.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "coordinator/service/cluster_types.h"

namespace memcoord::coordinator {

struct RankAck {
  int rank = -1;
  int code = 0;  // memcoord StatusCode, 0 = OK
  std::string message;
  std::int64_t step = 0;
  std::uint64_t released_bytes = 0;
  std::uint64_t reserved_after_bytes = 0;
  double duration_ms = 0.0;
  Clock::time_point received_at{};
};

struct AckResult {
  std::vector<RankAck> acks;       // by rank
  std::vector<int> missing_ranks;  // no ack by the deadline, or died first
};

class AckBoard {
 public:
  // REQUIRES: command_id not open yet. Call it before sending: with `immediate`, the time of this call is
  // the send time of a round-trip sample.
  void open(std::uint64_t command_id, const std::vector<int>& ranks, bool immediate = false);
  // Records an ack; ignored for unknown commands or ranks not asked.
  void deliver(std::uint64_t command_id, const RankAck& ack);
  // Strikes `rank` off every open command (it died).
  void rank_gone(int rank);
  // Waits until every rank acked or is gone, or `deadline`; closes the entry.
  AckResult wait(std::uint64_t command_id, Clock::time_point deadline);
  // Smoothed command round trip of `rank` (the larger of the last sample and the running average, so a
  // slow spell counts at once and fades slowly); 0 before any immediate command was acked.
  std::chrono::microseconds round_trip(int rank) const;

 private:
  struct Entry {
    std::set<int> waiting;
    std::set<int> gone;
    std::vector<RankAck> acks;
    bool immediate = false;
    Clock::time_point opened_at{};
  };
  struct RoundTrip {
    double last_us = 0;
    double average_us = 0;
  };
  void sample_round_trip(const Entry& entry, const RankAck& ack);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  // mu_ guards the following.
  std::map<std::uint64_t, Entry> entries_;
  std::map<int, RoundTrip> round_trips_;
};

}  // namespace memcoord::coordinator
