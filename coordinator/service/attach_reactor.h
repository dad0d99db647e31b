// The Attach stream of one worker, as a gRPC callback reactor (no thread per session; a reaction never
// blocks). Reads are processed as they complete (one read in flight at a time) by WorkerEvents; writes go
// through an outbox with one StartWrite in flight, so send() never blocks the sender, even toward a slow or
// stopped worker. The reactor deletes itself in OnDone, after it left the session registry.
//
// Limits: a stream takes one of --max-sessions slots before reading (none left: RESOURCE_EXHAUSTED at once)
// and may send --max-report-rate reports per second, sustained (beyond: cut off with RESOURCE_EXHAUSTED
// naming the limit; it counts as a protocol error). Acks and OOM requests are not counted: they answer
// the coordinator's commands or wait for its answer, so their rate is bounded by the coordinator. Every
// reaction catches exceptions: it logs them and ends this stream with INTERNAL, and the coordinator serves
// on.
//
// Internal to the coordinator library: included only by the service's .cc (it pulls in gRPC headers).
#pragma once

#include "coordinator/service/service_state.h"
#include "coordinator/service/worker_events.h"
#include "memcoord/v1/coordinator.grpc.pb.h"

namespace memcoord::coordinator {

// Starts a session on `context`. `admission` not OK (e.g. not authenticated): the call ends with it at once.
grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* StartAttachSession(
    grpc::CallbackServerContext* context, ServiceState& state, WorkerEvents& events, const Status& admission);

}  // namespace memcoord::coordinator
