// ClusterViewJson's two field sets against the exact text the two serializers it replaced printed
// (cli/status_command.cc's ToJson for `memcoord status --json`, coordinator/http/api_json.cc's ClusterJson
// for /api/cluster), captured from them before the move, plus the keys added since (device_uuid in the
// status set): a script reading `status --json` sees the same bytes for every key it knew.
#include "coordinator/service/cluster_json.h"

#include <gtest/gtest.h>

namespace memcoord::coordinator {
namespace {

// Two workers (one live with two pools and tags, one dead on the host backend), a leak, coordinator stats.
ClusterView Sample() {
  ClusterView v;
  WorkerRecord a;
  a.id.rank = 0;
  a.id.world_size = 2;
  a.id.host = "node-a";
  a.id.device = 0;
  a.id.device_name = "NVIDIA H200";
  a.id.device_uuid = "GPU-1234";
  a.id.backend = "cuda";
  a.id.device_total_bytes = 150'000'000'000;
  a.id.pid = 4242;
  a.step = 17;
  a.steps_per_second = 2.5;
  a.last_report_age_ms = 40;
  a.device_free_bytes = 90'000'000'000;
  a.device_budget_bytes = 120'000'000'000;
  PoolUsage p;
  p.name = "default";
  p.allocated_bytes = 1 << 20;
  p.peak_allocated_bytes = 3 << 20;
  p.reserved_bytes = 4 << 20;
  p.peak_reserved_bytes = 5 << 20;
  p.largest_free_bytes = 123;
  p.trims = 2;
  p.trimmed_bytes = 77;
  p.ooms = 1;
  p.allocations = 1000;
  p.cache_hits = 990;
  p.driver_map_calls = 7;
  p.driver_unmap_calls = 3;
  p.tags = {{"activations", 900, 9}, {"optimizer", 100, 1}};
  a.pools.push_back(p);
  PoolUsage q;
  q.name = "kv \"cache\"";
  q.limit_bytes = std::uint64_t{1} << 40;
  a.pools.push_back(q);
  WorkerRecord b;
  b.id.rank = 1;
  b.id.local_rank = 1;
  b.id.world_size = 2;
  b.id.host = "node-b";
  b.id.backend = "host";
  b.state = WorkerState::kDead;
  b.dead_reason = "stream closed";
  b.step = 16;
  b.steps_per_second = 0.125;
  b.last_report_age_ms = 5000;
  v.workers = {a, b};
  v.leaks.push_back({0, "default", "activations", -12, 3, 15, 900});
  v.stats.coordinator_id = "coord-1";
  v.stats.uptime_ms = 123456;
  v.stats.reports = 99;
  v.stats.report_handling_p50_us = 12.5;
  v.stats.report_handling_p99_us = 80.25;
  v.stats.live_sessions = 1;
  v.stats.trim_fanout.count = 4;
  return v;
}

TEST(ClusterJsonTest, StatusFieldsAreWhatStatusJsonAlwaysPrinted) {
  EXPECT_EQ(
      ClusterViewJson(Sample(), ClusterJsonFields::kStatus).dump(),
      R"json({"coordinator":{"id":"coord-1","live_sessions":1,"report_handling_p50_us":12.5,"report_handling_p99_us":80.25,"reports":99,"uptime_ms":123456},"leaks":[{"bytes_per_step":-12,"first_step":3,"last_step":15,"live_bytes":900,"pool":"default","rank":0,"tag":"activations"}],"workers":[{"backend":"cuda","dead_reason":"","device":0,"device_budget_bytes":120000000000,"device_free_bytes":90000000000,"device_name":"NVIDIA H200","device_total_bytes":150000000000,"device_uuid":"GPU-1234","group":"world","host":"node-a","last_report_age_ms":40,"local_rank":0,"pid":4242,"pools":[{"allocated_bytes":1048576,"largest_free_bytes":123,"limit_bytes":0,"name":"default","ooms":1,"peak_allocated_bytes":3145728,"peak_reserved_bytes":5242880,"reserved_bytes":4194304,"tags":[{"live_bytes":900,"tag":"activations"},{"live_bytes":100,"tag":"optimizer"}],"trimmed_bytes":77,"trims":2},{"allocated_bytes":0,"largest_free_bytes":0,"limit_bytes":1099511627776,"name":"kv \"cache\"","ooms":0,"peak_allocated_bytes":0,"peak_reserved_bytes":0,"reserved_bytes":0,"tags":[],"trimmed_bytes":0,"trims":0}],"rank":0,"state":"live","step":17,"world_size":2},{"backend":"host","dead_reason":"stream closed","device":-1,"device_budget_bytes":0,"device_free_bytes":0,"device_name":"","device_total_bytes":0,"device_uuid":"","group":"world","host":"node-b","last_report_age_ms":5000,"local_rank":1,"pid":0,"pools":[],"rank":1,"state":"dead","step":16,"world_size":2}]})json");
  EXPECT_EQ(
      ClusterViewJson(ClusterView{}, ClusterJsonFields::kStatus).dump(),
      R"json({"coordinator":{"id":"","live_sessions":0,"report_handling_p50_us":0.0,"report_handling_p99_us":0.0,"reports":0,"uptime_ms":0},"leaks":[],"workers":[]})json");
}

TEST(ClusterJsonTest, DashboardFieldsAreWhatApiClusterAlwaysServed) {
  EXPECT_EQ(
      ClusterViewJson(Sample(), ClusterJsonFields::kDashboard).dump(),
      R"json({"coordinator":{"id":"coord-1","live_sessions":1,"report_handling_p50_us":12.5,"report_handling_p99_us":80.25,"reports":99,"trims":4,"uptime_ms":123456},"leaks":[{"bytes_per_step":-12,"first_step":3,"last_step":15,"live_bytes":900,"pool":"default","rank":0,"tag":"activations"}],"workers":[{"backend":"cuda","dead_reason":"","device":0,"device_budget_bytes":120000000000,"device_free_bytes":90000000000,"device_name":"NVIDIA H200","device_total_bytes":150000000000,"device_uuid":"GPU-1234","group":"world","host":"node-a","last_report_age_ms":40,"local_rank":0,"pid":4242,"pools":[{"allocated_bytes":1048576,"allocations":1000,"cache_hits":990,"driver_map_calls":7,"driver_unmap_calls":3,"largest_free_bytes":123,"limit_bytes":0,"name":"default","ooms":1,"peak_allocated_bytes":3145728,"peak_reserved_bytes":5242880,"reserved_bytes":4194304,"tags":[{"live_blocks":9,"live_bytes":900,"tag":"activations"},{"live_blocks":1,"live_bytes":100,"tag":"optimizer"}],"trimmed_bytes":77,"trims":2},{"allocated_bytes":0,"allocations":0,"cache_hits":0,"driver_map_calls":0,"driver_unmap_calls":0,"largest_free_bytes":0,"limit_bytes":1099511627776,"name":"kv \"cache\"","ooms":0,"peak_allocated_bytes":0,"peak_reserved_bytes":0,"reserved_bytes":0,"tags":[],"trimmed_bytes":0,"trims":0}],"rank":0,"state":"live","step":17,"steps_per_second":2.5,"world_size":2},{"backend":"host","dead_reason":"stream closed","device":-1,"device_budget_bytes":0,"device_free_bytes":0,"device_name":"","device_total_bytes":0,"device_uuid":"","group":"world","host":"node-b","last_report_age_ms":5000,"local_rank":1,"pid":0,"pools":[],"rank":1,"state":"dead","step":16,"steps_per_second":0.125,"world_size":2}]})json");
  EXPECT_EQ(
      ClusterViewJson(ClusterView{}, ClusterJsonFields::kDashboard).dump(),
      R"json({"coordinator":{"id":"","live_sessions":0,"report_handling_p50_us":0.0,"report_handling_p99_us":0.0,"reports":0,"trims":0,"uptime_ms":0},"leaks":[],"workers":[]})json");
}

}  // namespace
}  // namespace memcoord::coordinator
