#include "repair.hpp"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"

namespace genie::replay {

bool parse_control_deps(const std::string& s, ControlDeps* out) {
  if (s == "repair")
    *out = ControlDeps::Repair;
  else if (s == "ignore")
    *out = ControlDeps::Ignore;
  else if (s == "strict")
    *out = ControlDeps::Strict;
  else
    return false;
  return true;
}

namespace {

const char* plural(size_t n) { return n == 1 ? "" : "s"; }

// The CPU side of a collective (PyTorch's record_param_comms and the like):
// a COMM_COLL_NODE with is_cpu_op and no comm_type. Its GPU side is the
// collective; this one is host time.
void cpu_collectives(Trace& t) {
  size_t n = 0;
  std::string first;
  for (Node& node : t.nodes) {
    if (node.type != NodeType::CommColl) continue;
    auto ct = node.attrs.find("comm_type");
    if ((ct != node.attrs.end() && ct->second.has_int) || node.attr_int("is_cpu_op", 0) == 0) continue;
    node.type = NodeType::Comp;
    if (n++ == 0) first = node.label();
  }
  if (n)
    t.warnings.push_back(
        cat(n, " COMM_COLL_NODE", plural(n), " with is_cpu_op and no comm_type (the CPU side of a ",
            "collective; the first: ", first, ") ran as compute: a timed wait of the duration"));
}

enum : uint8_t { kData = 1, kCtrl = 2 };
struct Edge {
  size_t dep;     // position of the node depended on
  uint8_t kinds;  // kData | kCtrl
};

std::string short_label(const Node& n) { return cat(n.id, " '", n.name, "'"); }

}  // namespace

void repair_trace(Trace& t, ControlDeps mode) {
  cpu_collectives(t);
  if (mode == ControlDeps::Strict) return;
  if (mode == ControlDeps::Ignore)
    for (Node& n : t.nodes) n.ctrl_deps.clear();
  const size_t n = t.nodes.size();
  std::unordered_map<uint64_t, size_t> pos;
  for (size_t i = 0; i < n; ++i)
    if (!pos.emplace(t.nodes[i].id, i).second) return;  // two nodes with one id: validate_trace names them

  // Dependencies on nodes the file does not have, or on the node itself.
  size_t dangling[2] = {0, 0}, self[2] = {0, 0};  // [data, control]
  std::string first_dangling, first_self;
  std::vector<std::vector<Edge>> deps(n);
  for (size_t i = 0; i < n; ++i) {
    Node& node = t.nodes[i];
    for (int k = 0; k < 2; ++k) {
      std::vector<uint64_t>& list = k == 0 ? node.data_deps : node.ctrl_deps;
      std::vector<uint64_t> keep;
      for (uint64_t d : list) {
        auto it = pos.find(d);
        if (it == pos.end()) {
          if (dangling[0] + dangling[1] == 0) first_dangling = cat(node.label(), " on node ", d);
          ++dangling[k];
          continue;
        }
        if (it->second == i) {
          if (self[0] + self[1] == 0) first_self = node.label();
          ++self[k];
          continue;
        }
        keep.push_back(d);
        const uint8_t kind = k == 0 ? kData : kCtrl;
        auto e =
            std::find_if(deps[i].begin(), deps[i].end(), [&](const Edge& x) { return x.dep == it->second; });
        if (e == deps[i].end())
          deps[i].push_back(Edge{it->second, kind});
        else
          e->kinds |= kind;
      }
      list = std::move(keep);
    }
  }
  if (const size_t d = dangling[0] + dangling[1])
    t.warnings.push_back(cat("dropped ", d, " dependenc", d == 1 ? "y" : "ies",
                             " on nodes the file does not have (", dangling[1], " control, ", dangling[0],
                             " data; the first: ", first_dangling, ")"));
  if (const size_t s = self[0] + self[1])
    t.warnings.push_back(cat("dropped ", s, " dependenc", s == 1 ? "y" : "ies", " of a node on itself (",
                             self[1], " control, ", self[0], " data; the first: ", first_self, ")"));

  // Cycles: Kahn's algorithm; where it stalls, every node left waits on
  // another one left, so following dependencies among them from any one
  // comes back to a node already on the path: that loop is a cycle, and
  // dropping one of its dependencies lets the order go on.
  std::vector<size_t> indeg(n);
  std::vector<std::vector<size_t>> users(n);
  for (size_t i = 0; i < n; ++i)
    for (const Edge& e : deps[i]) {
      ++indeg[i];
      users[e.dep].push_back(i);
    }
  auto has_edge = [&](size_t from, size_t to) {
    return std::any_of(deps[from].begin(), deps[from].end(), [&](const Edge& e) { return e.dep == to; });
  };
  std::vector<char> done(n, 0);
  std::vector<size_t> ready;
  for (size_t i = 0; i < n; ++i)
    if (!indeg[i]) ready.push_back(i);
  std::vector<long> on_path(n, -1);
  size_t processed = 0, cursor = 0, cycles = 0;
  constexpr size_t kNamed = 3, kShownNodes = 8;
  std::vector<std::string> named;
  for (;;) {
    while (!ready.empty()) {
      const size_t i = ready.back();
      ready.pop_back();
      done[i] = 1;
      ++processed;
      for (size_t u : users[i])
        if (has_edge(u, i) && --indeg[u] == 0) ready.push_back(u);
    }
    if (processed == n) break;
    while (done[cursor]) ++cursor;
    std::vector<size_t> path;
    size_t cur = cursor;
    while (on_path[cur] < 0) {
      on_path[cur] = static_cast<long>(path.size());
      path.push_back(cur);
      auto e = std::find_if(deps[cur].begin(), deps[cur].end(), [&](const Edge& x) { return !done[x.dep]; });
      cur = e->dep;  // one exists: cur is not done and not ready
    }
    const std::vector<size_t> cycle(path.begin() + on_path[cur], path.end());
    for (size_t p : path) on_path[p] = -1;
    // cycle[j] depends on cycle[j + 1], the last on the first.
    auto edge_at = [&](size_t j) {
      const size_t from = cycle[j], to = cycle[(j + 1) % cycle.size()];
      return std::find_if(deps[from].begin(), deps[from].end(), [&](const Edge& e) { return e.dep == to; });
    };
    size_t j = 0;
    for (size_t k = 0; k < cycle.size(); ++k)
      if (edge_at(k)->kinds == kCtrl) {
        j = k;
        break;
      }
    const size_t from = cycle[j], to = cycle[(j + 1) % cycle.size()];
    auto e = edge_at(j);
    const uint8_t kinds =
        e->kinds == kCtrl ? static_cast<uint8_t>(kCtrl) : static_cast<uint8_t>(kData | kCtrl);
    if (kinds & kData) std::erase(t.nodes[from].data_deps, t.nodes[to].id);
    if (kinds & kCtrl) std::erase(t.nodes[from].ctrl_deps, t.nodes[to].id);
    deps[from].erase(e);
    if (--indeg[from] == 0) ready.push_back(from);
    if (named.size() < kNamed) {
      std::string s;
      for (size_t k = 0; k < cycle.size() && k < kShownNodes; ++k)
        s += cat(k ? " -> " : "", short_label(t.nodes[cycle[k]]));
      s += cycle.size() > kShownNodes ? cat(" -> ... (", cycle.size(), " nodes)")
                                      : cat(" -> ", short_label(t.nodes[cycle[0]]));
      named.push_back(cat(s, ": dropped the ", kinds == kCtrl ? "control" : "data", " dependency of node ",
                          t.nodes[from].id, " on node ", t.nodes[to].id));
    }
    ++cycles;
  }
  if (cycles) {
    std::string s =
        cat("broke ", cycles, " dependency cycle", plural(cycles), " (each node depends on the next): ");
    for (size_t k = 0; k < named.size(); ++k) s += cat(k ? "; " : "", named[k]);
    if (cycles > named.size()) s += cat("; and ", cycles - named.size(), " more");
    t.warnings.push_back(std::move(s));
  }
}

}  // namespace genie::replay
