#include "coordinator/service/proto_convert.h"

namespace memcoord::coordinator {

PoolUsage FromProto(const v1::PoolStats& in) {
  PoolUsage out;
  out.name = in.name();
  out.allocated_bytes = in.allocated_bytes();
  out.peak_allocated_bytes = in.peak_allocated_bytes();
  out.reserved_bytes = in.reserved_bytes();
  out.peak_reserved_bytes = in.peak_reserved_bytes();
  out.limit_bytes = in.limit_bytes();
  out.largest_free_bytes = in.largest_free_bytes();
  out.trims = in.trims();
  out.trimmed_bytes = in.trimmed_bytes();
  out.ooms = in.ooms();
  out.allocations = in.allocations();
  out.cache_hits = in.cache_hits();
  out.driver_map_calls = in.driver_map_calls();
  out.driver_unmap_calls = in.driver_unmap_calls();
  for (const v1::TagUsage& t : in.tags()) {
    out.tags.push_back(TagBytes{t.tag(), t.live_bytes(), t.live_blocks()});
  }
  return out;
}

std::vector<PoolUsage> FromProto(const google::protobuf::RepeatedPtrField<v1::PoolStats>& in) {
  std::vector<PoolUsage> out;
  out.reserve(static_cast<std::size_t>(in.size()));
  for (const v1::PoolStats& p : in) out.push_back(FromProto(p));
  return out;
}

WorkerIdentity FromProto(const v1::Register& in) {
  WorkerIdentity out;
  out.rank = in.rank();
  out.local_rank = in.local_rank();
  out.world_size = in.world_size();
  out.host = in.host();
  out.device = in.device();
  out.device_name = in.device_name();
  out.device_uuid = in.device_uuid();
  out.backend = in.backend();
  out.device_total_bytes = in.device_total_bytes();
  out.group = in.group().empty() ? "world" : in.group();
  out.pid = in.pid();
  out.report_interval_ms = in.report_interval_ms();
  return out;
}

RankAck FromProto(const v1::Ack& in, int rank) {
  RankAck out;
  out.rank = rank;
  out.code = in.code();
  out.message = in.message();
  out.step = in.step();
  out.released_bytes = in.released_bytes();
  out.reserved_after_bytes = in.reserved_after_bytes();
  out.duration_ms = in.duration_ms();
  out.received_at = Clock::now();
  return out;
}

WorkerRecord FromProto(const v1::WorkerInfo& in) {
  WorkerRecord out;
  out.id.rank = in.rank();
  out.id.local_rank = in.local_rank();
  out.id.world_size = in.world_size();
  out.id.host = in.host();
  out.id.device = in.device();
  out.id.device_name = in.device_name();
  out.id.device_uuid = in.device_uuid();
  out.id.backend = in.backend();
  out.id.group = in.group();
  out.id.pid = in.pid();
  out.id.device_total_bytes = in.device_total_bytes();
  out.state = in.state() == v1::WORKER_STATE_DEAD      ? WorkerState::kDead
              : in.state() == v1::WORKER_STATE_SUSPECT ? WorkerState::kSuspect
                                                       : WorkerState::kLive;
  out.dead_reason = in.dead_reason();
  out.step = in.step();
  out.last_report_age_ms = in.last_report_age_ms();
  out.device_free_bytes = in.device_free_bytes();
  out.device_budget_bytes = in.device_budget_bytes();
  out.reports = in.reports();
  out.pools = FromProto(in.pools());
  return out;
}

LeakAlert FromProto(const v1::LeakAlert& in) {
  LeakAlert out;
  out.rank = in.rank();
  out.pool = in.pool();
  out.tag = in.tag();
  out.bytes_per_step = in.bytes_per_step();
  out.first_step = in.first_step();
  out.last_step = in.last_step();
  out.live_bytes = in.live_bytes();
  return out;
}

ClusterView FromProto(const v1::ClusterSnapshot& in) {
  ClusterView out;
  for (const v1::WorkerInfo& w : in.workers()) out.workers.push_back(FromProto(w));
  for (const v1::LeakAlert& l : in.leaks()) out.leaks.push_back(FromProto(l));
  const v1::CoordinatorStats& s = in.stats();
  out.stats.coordinator_id = s.coordinator_id();
  out.stats.uptime_ms = s.uptime_ms();
  out.stats.reports = s.reports();
  out.stats.report_handling_p50_us = s.report_handling_p50_us();
  out.stats.report_handling_p99_us = s.report_handling_p99_us();
  out.stats.live_sessions = s.live_sessions();
  return out;
}

void ToProto(const PoolUsage& in, v1::PoolStats* out) {
  out->set_name(in.name);
  out->set_allocated_bytes(in.allocated_bytes);
  out->set_peak_allocated_bytes(in.peak_allocated_bytes);
  out->set_reserved_bytes(in.reserved_bytes);
  out->set_peak_reserved_bytes(in.peak_reserved_bytes);
  out->set_limit_bytes(in.limit_bytes);
  out->set_largest_free_bytes(in.largest_free_bytes);
  out->set_trims(in.trims);
  out->set_trimmed_bytes(in.trimmed_bytes);
  out->set_ooms(in.ooms);
  out->set_allocations(in.allocations);
  out->set_cache_hits(in.cache_hits);
  out->set_driver_map_calls(in.driver_map_calls);
  out->set_driver_unmap_calls(in.driver_unmap_calls);
  for (const TagBytes& t : in.tags) {
    v1::TagUsage* tag = out->add_tags();
    tag->set_tag(t.tag);
    tag->set_live_bytes(t.live_bytes);
    tag->set_live_blocks(t.live_blocks);
  }
}

void ToProto(const WorkerRecord& in, v1::WorkerInfo* out) {
  out->set_rank(in.id.rank);
  out->set_local_rank(in.id.local_rank);
  out->set_world_size(in.id.world_size);
  out->set_host(in.id.host);
  out->set_device(in.id.device);
  out->set_device_name(in.id.device_name);
  out->set_device_uuid(in.id.device_uuid);
  out->set_backend(in.id.backend);
  out->set_group(in.id.group);
  out->set_pid(in.id.pid);
  out->set_state(in.state == WorkerState::kLive      ? v1::WORKER_STATE_LIVE
                 : in.state == WorkerState::kSuspect ? v1::WORKER_STATE_SUSPECT
                                                     : v1::WORKER_STATE_DEAD);
  out->set_dead_reason(in.dead_reason);
  out->set_step(in.step);
  out->set_last_report_age_ms(in.last_report_age_ms);
  out->set_device_total_bytes(in.id.device_total_bytes);
  out->set_device_free_bytes(in.device_free_bytes);
  out->set_device_budget_bytes(in.device_budget_bytes);
  out->set_reports(in.reports);
  for (const PoolUsage& p : in.pools) ToProto(p, out->add_pools());
}

void ToProto(const LeakAlert& in, v1::LeakAlert* out) {
  out->set_rank(in.rank);
  out->set_pool(in.pool);
  out->set_tag(in.tag);
  out->set_bytes_per_step(in.bytes_per_step);
  out->set_first_step(in.first_step);
  out->set_last_step(in.last_step);
  out->set_live_bytes(in.live_bytes);
}

void ToProto(const ClusterView& in, v1::ClusterSnapshot* out) {
  for (const WorkerRecord& w : in.workers) ToProto(w, out->add_workers());
  for (const LeakAlert& l : in.leaks) ToProto(l, out->add_leaks());
  v1::CoordinatorStats* s = out->mutable_stats();
  s->set_coordinator_id(in.stats.coordinator_id);
  s->set_uptime_ms(in.stats.uptime_ms);
  s->set_reports(in.stats.reports);
  s->set_report_handling_p50_us(in.stats.report_handling_p50_us);
  s->set_report_handling_p99_us(in.stats.report_handling_p99_us);
  s->set_live_sessions(in.stats.live_sessions);
}

LiveDevice FromProto(const v1::LiveDevice& in) {
  LiveDevice out;
  out.name = in.name();
  out.host = in.host();
  out.device = in.device();
  out.ranks.assign(in.ranks().begin(), in.ranks().end());
  out.free_bytes = in.free_bytes();
  out.cached_bytes = in.cached_bytes();
  out.capacity_bytes = in.capacity_bytes();
  out.total_bytes = in.total_bytes();
  return out;
}

void ToProto(const LiveDevice& in, v1::LiveDevice* out) {
  out->set_name(in.name);
  out->set_host(in.host);
  out->set_device(in.device);
  for (int r : in.ranks) out->add_ranks(r);
  out->set_free_bytes(in.free_bytes);
  out->set_cached_bytes(in.cached_bytes);
  out->set_capacity_bytes(in.capacity_bytes);
  out->set_total_bytes(in.total_bytes);
}

}  // namespace memcoord::coordinator
