// Tensors held on the server, reported lost by name: the contract is in
// held_tensors.hpp.
#include "runtime/held_tensors.hpp"

#include <algorithm>
#include <map>

#include "cluster/types.hpp"
#include "core/error.hpp"

namespace genie {

void HeldTensors::add(const RemoteTensorPtr& t, const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  held_[t.get()] = Entry{t, name};
  if (held_.size() <= pruned_at_) return;
  std::erase_if(held_, [](const auto& e) { return e.second.tensor.expired(); });
  pruned_at_ = std::max<size_t>(64, held_.size() * 2);
}

void HeldTensors::rename(const RemoteTensor& t, const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = held_.find(&t);
  if (it != held_.end() && it->second.tensor.lock().get() == &t) it->second.name = name;
}

std::string HeldTensors::name_of(const RemoteTensor& t) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = held_.find(&t);
  return label(t,
               it != held_.end() && it->second.tensor.lock().get() == &t ? it->second.name : std::string());
}

std::string HeldTensors::label(const RemoteTensor& t, const std::string& name) {
  return name.empty() ? cat("tensor ", t.id) : name;
}

bool HeldTensors::lost(const RemoteTensor& t) { return t.client->failed(); }

void HeldTensors::check_not_lost(const RemoteTensor& t, const std::string& address,
                                 const std::string& cause) const {
  if (!lost(t)) return;
  fail(GENIE_ERR_CONNECTION, "tensor '", name_of(t), "' (", dtype_name(t.dtype), ", ", t.nbytes, " bytes on ",
       t.device, ") is lost: it lived only on server ", t.node, " at ", address,
       ", whose session is gone for good", cause.empty() ? "" : cat(" (", cause, ")"),
       "; it is not recomputed or filled in: genie_init again reaches another server, where it must be "
       "written again (genie_context_lost_tensors lists every tensor lost)");
}

std::string HeldTensors::lost_json() const {
  std::map<std::string, RemoteTensorPtr> lost_by_name;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [ptr, e] : held_) {
      RemoteTensorPtr t = e.tensor.lock();
      if (t && lost(*t)) lost_by_name.emplace(cat(label(*t, e.name), "\n", t->id), std::move(t));
    }
  }
  JsonPtr list = json_array();
  for (const auto& [key, t] : lost_by_name) {
    JsonPtr o = json_object();
    cJSON_AddStringToObject(o.get(), "name", key.substr(0, key.find('\n')).c_str());
    cJSON_AddNumberToObject(o.get(), "id", static_cast<double>(t->id));
    cJSON_AddStringToObject(o.get(), "server", t->node.c_str());
    cJSON_AddStringToObject(o.get(), "device", t->device.c_str());
    cJSON_AddStringToObject(o.get(), "dtype", dtype_name(t->dtype));
    JsonPtr shape = json_array();
    for (int64_t d : t->shape) cJSON_AddItemToArray(shape.get(), cJSON_CreateNumber(static_cast<double>(d)));
    cJSON_AddItemToObject(o.get(), "shape", shape.release());
    cJSON_AddNumberToObject(o.get(), "nbytes", static_cast<double>(t->nbytes));
    cJSON_AddItemToArray(list.get(), o.release());
  }
  return json_text(list.get());
}

}  // namespace genie
