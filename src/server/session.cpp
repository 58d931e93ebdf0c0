#include "server/session.hpp"

#include "core/error.hpp"

namespace genie {

uint64_t Session::add(TensorPtr t) {
  settle();
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
  if (reading_.count(it->second.get()) != 0 && it->second.use_count() > 1) {
    lingering_.push_back({it->second, it->second->nbytes()});
  } else {
    counters_.tensor_bytes.fetch_sub(it->second->nbytes(), std::memory_order_relaxed);
    usage.bytes.fetch_sub(it->second->nbytes(), std::memory_order_relaxed);
  }
  tensors_.erase(it);
  return true;
}

void Session::read_begins(const TensorPtr& t) {
  Reading& r = reading_[t.get()];
  if (r.tensor.expired()) r = Reading{t, 0};  // an address used before by a tensor now gone
  ++r.reads;
}

void Session::read_ends(const TensorData* t) {
  auto it = reading_.find(t);
  if (it != reading_.end() && --it->second.reads <= 0) reading_.erase(it);
}

void Session::settle() {
  // Reads whose connection closed before they were sent never end: their
  // records go with their tensors.
  std::erase_if(reading_, [](const auto& r) { return r.second.tensor.expired(); });
  std::erase_if(lingering_, [&](const Lingering& l) {
    if (!l.tensor.expired()) return false;
    counters_.tensor_bytes.fetch_sub(l.bytes, std::memory_order_relaxed);
    usage.bytes.fetch_sub(l.bytes, std::memory_order_relaxed);
    return true;
  });
}

void Session::clear() {
  for (const auto& [id, t] : tensors_) {
    counters_.tensors.fetch_sub(1, std::memory_order_relaxed);
    counters_.tensor_bytes.fetch_sub(t->nbytes(), std::memory_order_relaxed);
    usage.bytes.fetch_sub(t->nbytes(), std::memory_order_relaxed);
  }
  tensors_.clear();
  remote_.clear();
  // The session ends: what it freed is no longer its to answer for.
  for (const Lingering& l : lingering_) {
    counters_.tensor_bytes.fetch_sub(l.bytes, std::memory_order_relaxed);
    usage.bytes.fetch_sub(l.bytes, std::memory_order_relaxed);
  }
  lingering_.clear();
  reading_.clear();
}

}  // namespace genie
