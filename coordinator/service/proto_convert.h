// Conversions between the coordinator core's plain types and memcoord.v1 messages. Pure functions; no
// validation beyond what the types force (the core validates). Included only by .cc files.
#pragma once

#include <vector>

#include "coordinator/service/ack_board.h"
#include "coordinator/service/cluster_types.h"
#include "memcoord/v1/coordinator.pb.h"

namespace memcoord::coordinator {

PoolUsage FromProto(const v1::PoolStats& in);
std::vector<PoolUsage> FromProto(const google::protobuf::RepeatedPtrField<v1::PoolStats>& in);
WorkerIdentity FromProto(const v1::Register& in);
RankAck FromProto(const v1::Ack& in, int rank);
WorkerRecord FromProto(const v1::WorkerInfo& in);
LeakAlert FromProto(const v1::LeakAlert& in);
ClusterView FromProto(const v1::ClusterSnapshot& in);
LiveDevice FromProto(const v1::LiveDevice& in);

void ToProto(const PoolUsage& in, v1::PoolStats* out);
void ToProto(const WorkerRecord& in, v1::WorkerInfo* out);
void ToProto(const LeakAlert& in, v1::LeakAlert* out);
void ToProto(const ClusterView& in, v1::ClusterSnapshot* out);
void ToProto(const LiveDevice& in, v1::LiveDevice* out);

}  // namespace memcoord::coordinator
