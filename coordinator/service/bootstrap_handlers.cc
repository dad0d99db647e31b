// Put and Get: the bootstrap key/value store's RPCs (see rpc_handlers.h and kv_store.h).
#include "coordinator/service/rpc_handlers.h"

namespace memcoord::coordinator {

Status HandlePut(ServiceState& state, const v1::PutRequest& request) {
  return state.kv.put(request.key(), request.value());
}

Status HandleGet(ServiceState& state, const v1::GetRequest& request, v1::GetResponse* reply,
                 const CancelledFn& cancelled) {
  MEMCOORD_ASSIGN_OR_RETURN(std::string value, state.kv.get(request.key(), request.wait_ms(), cancelled));
  reply->set_value(std::move(value));
  return Status::Ok();
}

}  // namespace memcoord::coordinator
