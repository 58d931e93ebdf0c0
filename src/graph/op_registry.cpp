// Op lookup over the built-in table and the custom ops registered at run
// time (docs/custom-ops.md).
#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>

#include "core/error.hpp"
#include "graph/op_schema.hpp"

namespace genie {

namespace {

struct CustomOps {
  std::shared_mutex mu;
  std::map<std::string, OpSchemaPtr> ops;
};

CustomOps& custom_ops() {
  // Never destroyed: a registration still present at exit stays valid for
  // threads that outlive static destruction, and nothing calls into a
  // vendor library that may already be unloaded.
  static CustomOps* c = new CustomOps;
  return *c;
}

// Optimal string alignment distance: Levenshtein plus adjacent
// transpositions, the commonest typo ("rleu").
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

OpSchemaPtr find_op(const std::string& name) {
  // A built-in schema is static: an aliasing pointer that owns nothing.
  if (const OpSchema* s = find_builtin_op(name)) return OpSchemaPtr(OpSchemaPtr(), s);
  CustomOps& c = custom_ops();
  std::shared_lock lk(c.mu);
  auto it = c.ops.find(name);
  return it == c.ops.end() ? nullptr : it->second;
}

std::vector<std::string> op_names() {
  std::vector<std::string> names = builtin_op_names();
  {
    CustomOps& c = custom_ops();
    std::shared_lock lk(c.mu);
    for (const auto& [name, schema] : c.ops) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> similar_op_names(const std::string& name) {
  // Close in spelling, or a known op that extends what was typed ("reduce").
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  std::set<std::pair<size_t, std::string>> ranked;
  for (const std::string& known : op_names()) {
    const size_t d = edit_distance(name, known);
    if (d <= limit || (name.size() >= 3 && known.rfind(name, 0) == 0)) ranked.emplace(d, known);
  }
  std::vector<std::string> out;
  for (auto it = ranked.begin(); it != ranked.end() && out.size() < 3; ++it) out.push_back(it->second);
  return out;
}

void add_custom_op(OpSchemaPtr schema) {
  check(schema != nullptr && schema->custom && schema->infer, GENIE_ERR_INTERNAL,
        "add_custom_op: not a custom schema");
  check(find_builtin_op(schema->name) == nullptr, GENIE_ERR_INVALID_ARGUMENT, "op name '", schema->name,
        "' is a built-in op (docs/operators.md); choose another, e.g. 'vendor.", schema->name, "'");
  CustomOps& c = custom_ops();
  std::unique_lock lk(c.mu);
  check(c.ops.count(schema->name) == 0, GENIE_ERR_INVALID_ARGUMENT, "custom op '", schema->name,
        "' is already registered (genie_op_unregister it first)");
  const std::string name = schema->name;
  c.ops.emplace(name, std::move(schema));
}

bool remove_custom_op(const std::string& name) {
  OpSchemaPtr dropped;  // released after the lock: it may run a destructor
  CustomOps& c = custom_ops();
  std::unique_lock lk(c.mu);
  auto it = c.ops.find(name);
  if (it == c.ops.end()) return false;
  dropped = std::move(it->second);
  c.ops.erase(it);
  lk.unlock();
  return true;
}

}  // namespace genie
