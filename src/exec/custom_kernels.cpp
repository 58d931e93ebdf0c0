#include "exec/custom_kernels.hpp"

#include <map>
#include <mutex>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace genie {

namespace {

struct Registry {
  std::shared_mutex mu;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<const CustomKernel>> kernels;  // (kind, op)
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed, as the custom schemas (graph/op_registry.cpp)
  return *r;
}

template <const char* Kind>
void run_custom(const KernelArgs& args) {
  std::shared_ptr<const CustomKernel> k = find_custom_kernel(Kind, args.op);
  check(k != nullptr, GENIE_ERR_UNKNOWN_OP, "custom op '", args.op, "' was unregistered");
  (*k)(args);
}

// One entry per device kind with custom kernels. A backend for a new kind
// (cuda) adds its line here when it lands (docs/custom-ops.md, "CUDA").
constexpr char kCpu[] = "cpu";
const std::map<std::string, KernelFn>& entries() {
  static const std::map<std::string, KernelFn> e = {{kCpu, &run_custom<kCpu>}};
  return e;
}

}  // namespace

void add_custom_kernel(const std::string& kind, const std::string& op, std::shared_ptr<const CustomKernel> k) {
  check(entries().count(kind) != 0, GENIE_ERR_UNSUPPORTED, "custom op '", op, "': no ", kind,
        " kernels can be registered in this build");
  Registry& r = registry();
  std::unique_lock lk(r.mu);
  const bool added = r.kernels.emplace(std::make_pair(kind, op), std::move(k)).second;
  check(added, GENIE_ERR_INVALID_ARGUMENT, "custom op '", op, "' already has a ", kind, " kernel");
}

void remove_custom_kernels(const std::string& op) {
  std::vector<std::shared_ptr<const CustomKernel>> dropped;  // released after the lock
  Registry& r = registry();
  std::unique_lock lk(r.mu);
  for (auto it = r.kernels.begin(); it != r.kernels.end();) {
    if (it->first.second == op) {
      dropped.push_back(std::move(it->second));
      it = r.kernels.erase(it);
    } else {
      ++it;
    }
  }
  lk.unlock();
}

std::shared_ptr<const CustomKernel> find_custom_kernel(const std::string& kind, const std::string& op) {
  Registry& r = registry();
  std::shared_lock lk(r.mu);
  auto it = r.kernels.find(std::make_pair(kind, op));
  return it == r.kernels.end() ? nullptr : it->second;
}

KernelFn custom_kernel_entry(const std::string& kind, const std::string& op) {
  auto e = entries().find(kind);
  if (e == entries().end() || !find_custom_kernel(kind, op)) return nullptr;
  return e->second;
}

}  // namespace genie
