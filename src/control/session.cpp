#include "control/session.hpp"

#include "core/error.hpp"

namespace genie {

uint64_t Session::add(TensorPtr t) {
  const uint64_t id = next_id_++;
  const size_t bytes = t->nbytes();
  tensors_.emplace(id, std::move(t));
  counters_.tensors.fetch_add(1, std::memory_order_relaxed);
  counters_.tensor_bytes.fetch_add(bytes, std::memory_order_relaxed);
  usage.bytes.fetch_add(bytes, std::memory_order_relaxed);
  return id;
}

TensorPtr Session::find(uint64_t id) const {
  auto it = tensors_.find(id);
  return it == tensors_.end() ? nullptr : it->second;
}

TensorPtr Session::get(uint64_t id) const {
  TensorPtr t = find(id);
  check(t != nullptr, GENIE_ERR_NOT_FOUND, "no tensor ", id, " in this session");
  return t;
}

uint64_t Session::add_remote(RemoteTensorPtr t) {
  const uint64_t id = next_id_++;
  remote_.emplace(id, std::move(t));
  return id;
}

RemoteTensorPtr Session::find_remote(uint64_t id) const {
  if (remote_.empty()) return nullptr;
  auto it = remote_.find(id);
  return it == remote_.end() ? nullptr : it->second;
}

bool Session::erase(uint64_t id) {
  auto it = tensors_.find(id);
  if (it == tensors_.end()) return remote_.erase(id) > 0;
  counters_.tensors.fetch_sub(1, std::memory_order_relaxed);
  counters_.tensor_bytes.fetch_sub(it->second->nbytes(), std::memory_order_relaxed);
  usage.bytes.fetch_sub(it->second->nbytes(), std::memory_order_relaxed);
  tensors_.erase(it);
  return true;
}

void Session::clear() {
  for (const auto& [id, t] : tensors_) {
    counters_.tensors.fetch_sub(1, std::memory_order_relaxed);
    counters_.tensor_bytes.fetch_sub(t->nbytes(), std::memory_order_relaxed);
    usage.bytes.fetch_sub(t->nbytes(), std::memory_order_relaxed);
  }
  tensors_.clear();
  remote_.clear();
}

}  // namespace genie
