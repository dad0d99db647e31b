#include "coordinator/service/session_registry.h"

namespace memcoord::coordinator {

void SessionRegistry::add(WorkerSession* session) {
  std::lock_guard lock(mu_);
  sessions_[session->id] = session;
}

bool SessionRegistry::remove(const WorkerSession* session) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(session->id);
  if (it == sessions_.end() || it->second != session) return false;
  sessions_.erase(it);
  return true;
}

bool SessionRegistry::send(std::uint64_t session_id, const v1::CoordinatorMessage& message) {
  std::lock_guard lock(mu_);  // keeps the session alive; send() only queues
  auto it = sessions_.find(session_id);
  return it != sessions_.end() && it->second->send(message);
}

void SessionRegistry::cancel(std::uint64_t session_id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(session_id);
  if (it != sessions_.end()) it->second->cancel();
}

void SessionRegistry::cancel_all() {
  std::lock_guard lock(mu_);
  for (auto& [id, session] : sessions_) session->cancel();
}

std::size_t SessionRegistry::size() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

}  // namespace memcoord::coordinator
