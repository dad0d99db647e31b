// ForwardingBackend<Inner>: a DeviceBackend that owns an `Inner` backend (a VirtualBackend, a HostBackend)
// and forwards every call to it (BackendAdaptor), for test backends that change one part (streams, the facts
// they report, checks on map/unmap) and keep the rest. Thread-safe as `Inner` is.
#pragma once

#include <utility>

#include "allocator/backend_adaptor.h"

namespace memcoord::testing {

namespace forwarding_detail {
// Holds the inner backend in a base that is built before BackendAdaptor takes a reference to it.
template <typename Inner>
struct InnerHolder {
  template <typename... Args>
  explicit InnerHolder(Args&&... args) : held(std::forward<Args>(args)...) {}
  Inner held;
};
}  // namespace forwarding_detail

template <typename Inner>
class ForwardingBackend : private forwarding_detail::InnerHolder<Inner>, public BackendAdaptor {
 public:
  template <typename... Args>
  explicit ForwardingBackend(Args&&... args)
      : forwarding_detail::InnerHolder<Inner>(std::forward<Args>(args)...), BackendAdaptor(this->held) {}

 protected:
  Inner& inner() { return this->held; }
  const Inner& inner() const { return this->held; }
};

}  // namespace memcoord::testing
