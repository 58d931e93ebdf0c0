#include "sched/learned_cost.hpp"

#include <cjson/cJSON.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "sched/graph_view.hpp"
#include "sched/profile_cache.hpp"

namespace genie::sched {

namespace {

// Version of the file's format; a file of another version is ignored (and
// replaced by the next save).
constexpr int kLearnedVersion = 2;
constexpr int kMaxBucket = 80;  // 2^80 FLOPs + bytes: beyond any node

// A graph key as 16 hex digits under "graph" in `o` (parse_hex reads it).
void add_graph_key(cJSON* o, uint64_t k) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(k));
  cJSON_AddStringToObject(o, "graph", hex);
}

bool parse_hex(const char* s, uint64_t* out) {
  if (std::strlen(s) != 16) return false;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 16);
  if (end != s + 16) return false;
  *out = v;
  return true;
}

// A mean of seconds and its count from `o` (under those keys); false, and
// nothing set, when either is missing or out of range.
bool load_seconds(const cJSON* o, const char* s_key, const char* n_key, double* s, uint64_t* n) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(o, s_key);
  const cJSON* c = cJSON_GetObjectItemCaseSensitive(o, n_key);
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || !(v->valuedouble < 1) || !cJSON_IsNumber(c) ||
      !(c->valuedouble >= 1))
    return false;
  *s = v->valuedouble;
  *n = static_cast<uint64_t>(c->valuedouble);
  return true;
}

}  // namespace

CostLearner::CostLearner(std::string file) : file_(std::move(file)) { load(); }

std::shared_ptr<CostLearner> CostLearner::shared(const std::string& file) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::weak_ptr<CostLearner>> by_file;
  std::lock_guard<std::mutex> lk(mu);
  std::weak_ptr<CostLearner>& slot = by_file[file];
  std::shared_ptr<CostLearner> l = slot.lock();
  if (!l) {
    l = std::make_shared<CostLearner>(file);
    slot = l;
  }
  return l;
}

std::string CostLearner::file_for_profile(const std::string& profile_file) {
  if (profile_file.empty()) return "";
  std::string base = profile_file;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0) base.resize(base.size() - 5);
  return base + ".learned.json";
}

int CostLearner::bucket(double work) {
  if (!(work >= 2)) return 0;
  return std::min(kMaxBucket, static_cast<int>(std::floor(std::log2(work))));
}

double CostLearner::factor(OpCode c, double work) const {
  const int b = bucket(work);
  std::shared_lock<std::shared_mutex> lk(mu_);
  if (cells_.empty()) return 1;
  // Its own bucket, else the nearest within two (the smaller first).
  for (int d : {0, -1, 1, -2, 2}) {
    const int at = b + d;
    if (at < 0 || at > kMaxBucket) continue;
    if (auto it = cells_.find(key(c, at)); it != cells_.end() && it->second.count >= kMinObservations)
      return std::exp(it->second.log_factor);
  }
  return 1;
}

bool CostLearner::log_ratio(double model_s, double measured_s, double* x) {
  if (!(model_s > 0) || !(measured_s > 0) || !std::isfinite(model_s) || !std::isfinite(measured_s)) return false;
  const double limit = std::log(kMaxFactor);
  *x = std::clamp(std::log(measured_s / model_s), -limit, limit);
  return true;
}

double CostLearner::Window::add(double current, uint64_t count, double x) {
  auto push = [this](double y) {
    v[next] = y;
    next = static_cast<uint8_t>((next + 1) % kWindow);
    if (n < kWindow) ++n;
  };
  if (n == 0 && count > 0) push(current);  // a loaded estimate
  push(x);
  // Insertion sort: at most kWindow values (std::sort draws a false
  // -Warray-bounds from GCC 12 on so small an array).
  double sorted[kWindow];
  for (int i = 0; i < n; ++i) {
    int j = i;
    for (; j > 0 && sorted[j - 1] > v[i]; --j) sorted[j] = sorted[j - 1];
    sorted[j] = v[i];
  }
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

void CostLearner::observe(OpCode c, double work, double model_s, double measured_s) {
  double x;
  if (!log_ratio(model_s, measured_s, &x)) return;
  std::unique_lock<std::shared_mutex> lk(mu_);
  cells_[key(c, bucket(work))].add(x);
  ++observations_;
  dirty_ = true;
}

void CostLearner::observe_node(uint64_t graph, size_t node, double model_s, double measured_s) {
  double x;
  if (graph == 0 || node >= kMaxGraphNodes || !log_ratio(model_s, measured_s, &x)) return;
  std::unique_lock<std::shared_mutex> lk(mu_);
  auto it = node_cells_.find(graph);
  if (it == node_cells_.end()) {
    if (node_cells_.size() >= kMaxGraphs) {
      // Room for a new graph: the least observed one goes.
      auto least = node_cells_.begin();
      for (auto n = node_cells_.begin(); n != node_cells_.end(); ++n)
        if (n->second.observed < least->second.observed) least = n;
      node_cells_.erase(least);
    }
    it = node_cells_.emplace(graph, GraphNodes{}).first;
  }
  GraphNodes& g = it->second;
  if (g.cells.size() <= node) g.cells.resize(node + 1);
  g.cells[node].add(x);
  ++g.observed;
  dirty_ = true;
}

void CostLearner::observe_total(uint64_t graph, double parts_s, double measured_s) {
  double x;
  if (graph == 0 || !log_ratio(parts_s, measured_s, &x)) return;
  std::unique_lock<std::shared_mutex> lk(mu_);
  if (total_cells_.size() >= kMaxGraphs && !total_cells_.count(graph)) total_cells_.erase(total_cells_.begin());
  total_cells_[graph].add(x);
}

double CostLearner::total_factor(uint64_t graph) const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  auto it = total_cells_.find(graph);
  return it != total_cells_.end() && it->second.count >= kMinObservations ? std::exp(it->second.log_factor) : 1;
}

bool CostLearner::node_factor(uint64_t graph, size_t node, double* f) const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  auto it = node_cells_.find(graph);
  if (it == node_cells_.end() || node >= it->second.cells.size() ||
      it->second.cells[node].count < kMinObservations)
    return false;
  *f = std::exp(it->second.cells[node].log_factor);
  return true;
}

void CostLearner::observe_run(uint64_t graph, size_t n_nodes, double run_s, double nodes_s) {
  if (n_nodes == 0 || !(run_s > 0) || !(nodes_s >= 0) || !std::isfinite(run_s) || !std::isfinite(nodes_s))
    return;
  const double x = std::max(0.0, run_s - nodes_s) / static_cast<double>(n_nodes);
  std::unique_lock<std::shared_mutex> lk(mu_);
  gap_.add(x);
  if (graph != 0) {
    if (graph_gap_.size() >= kMaxGraphs && !graph_gap_.count(graph)) {
      // Room for a new graph: the least observed one goes.
      auto least = graph_gap_.begin();
      for (auto it = graph_gap_.begin(); it != graph_gap_.end(); ++it)
        if (it->second.count < least->second.count) least = it;
      graph_gap_.erase(least);
    }
    graph_gap_[graph].add(x);
  }
  dirty_ = true;
}

double CostLearner::gap_s(uint64_t graph) const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  if (graph != 0)
    if (auto it = graph_gap_.find(graph); it != graph_gap_.end() && it->second.count >= kMinObservations)
      return it->second.s;
  return gap_.count >= kMinObservations ? gap_.s : 0;
}

void CostLearner::observe_stage(double overhead_s) {
  if (!std::isfinite(overhead_s)) return;
  std::unique_lock<std::shared_mutex> lk(mu_);
  stage_.add(std::max(0.0, overhead_s));
  dirty_ = true;
}

double CostLearner::stage_s() const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  return stage_.s;
}

bool CostLearner::stage_known() const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  return stage_.count >= kMinObservations;
}

uint64_t CostLearner::observations() const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  return observations_;
}

size_t CostLearner::cells() const {
  std::shared_lock<std::shared_mutex> lk(mu_);
  return cells_.size();
}

void CostLearner::load() {
  if (file_.empty()) return;
  std::string text;
  if (!read_text_file(file_, &text)) return;
  cJSON* root = cJSON_ParseWithLength(text.data(), text.size());
  if (!root) return;
  const cJSON* ver = cJSON_GetObjectItemCaseSensitive(root, "version");
  const cJSON* cells = cJSON_GetObjectItemCaseSensitive(root, "cells");
  // Version 1 files (cells and the device's gap) load as they are.
  if (cJSON_IsNumber(ver) && (ver->valuedouble == 1 || ver->valuedouble == kLearnedVersion) &&
      cJSON_IsArray(cells)) {
    const double limit = std::log(kMaxFactor);
    load_seconds(root, "gap_s", "gap_count", &gap_.s, &gap_.count);
    load_seconds(root, "stage_s", "stage_count", &stage_.s, &stage_.count);
    const cJSON* gn;
    cJSON_ArrayForEach(gn, cJSON_GetObjectItemCaseSensitive(root, "graph_nodes")) {
      const cJSON* key = cJSON_GetObjectItemCaseSensitive(gn, "graph");
      const cJSON* fs = cJSON_GetObjectItemCaseSensitive(gn, "factors");
      const cJSON* ns = cJSON_GetObjectItemCaseSensitive(gn, "counts");
      uint64_t k = 0;
      if (!cJSON_IsString(key) || !parse_hex(key->valuestring, &k) || k == 0 || !cJSON_IsArray(fs) ||
          !cJSON_IsArray(ns) || cJSON_GetArraySize(fs) != cJSON_GetArraySize(ns) ||
          cJSON_GetArraySize(fs) > static_cast<int>(kMaxGraphNodes) || node_cells_.size() >= kMaxGraphs)
        continue;
      GraphNodes g;
      g.cells.resize(static_cast<size_t>(cJSON_GetArraySize(fs)));
      const cJSON* f = fs->child;
      const cJSON* n = ns->child;
      // A damaged node's cell stays empty (its class's applies).
      for (size_t i = 0; f && n; ++i, f = f->next, n = n->next) {
        if (!cJSON_IsNumber(f) || !(f->valuedouble > 0) || !std::isfinite(f->valuedouble) || !cJSON_IsNumber(n) ||
            !(n->valuedouble >= 1))
          continue;
        g.cells[i].log_factor = std::clamp(std::log(f->valuedouble), -limit, limit);
        g.cells[i].count = static_cast<uint64_t>(n->valuedouble);
        g.observed += g.cells[i].count;
      }
      node_cells_[k] = std::move(g);
    }
    const cJSON* gg;
    cJSON_ArrayForEach(gg, cJSON_GetObjectItemCaseSensitive(root, "graph_gaps")) {
      const cJSON* key = cJSON_GetObjectItemCaseSensitive(gg, "graph");
      uint64_t k = 0;
      Seconds v;
      if (!cJSON_IsString(key) || !parse_hex(key->valuestring, &k) || k == 0 ||
          !load_seconds(gg, "gap_s", "count", &v.s, &v.count) || graph_gap_.size() >= kMaxGraphs)
        continue;
      graph_gap_[k] = v;
    }
    const cJSON* c;
    cJSON_ArrayForEach(c, cells) {
      const cJSON* op = cJSON_GetObjectItemCaseSensitive(c, "op");
      const cJSON* b = cJSON_GetObjectItemCaseSensitive(c, "bucket");
      const cJSON* f = cJSON_GetObjectItemCaseSensitive(c, "factor");
      const cJSON* n = cJSON_GetObjectItemCaseSensitive(c, "count");
      OpCode code;
      // A damaged cell is skipped; the others still load.
      if (!cJSON_IsString(op) || !op_class_from_name(op->valuestring, &code) || !cJSON_IsNumber(b) ||
          b->valuedouble < 0 || b->valuedouble > kMaxBucket || !cJSON_IsNumber(f) || !(f->valuedouble > 0) ||
          !std::isfinite(f->valuedouble) || !cJSON_IsNumber(n) || !(n->valuedouble >= 1))
        continue;
      Cell& cell = cells_[key(code, static_cast<int>(b->valuedouble))];
      cell.log_factor = std::clamp(std::log(f->valuedouble), -limit, limit);
      cell.count = static_cast<uint64_t>(n->valuedouble);
    }
  }
  cJSON_Delete(root);
}

bool CostLearner::save() {
  if (file_.empty()) return false;
  cJSON* root = cJSON_CreateObject();
  if (!root) return false;
  {
    std::unique_lock<std::shared_mutex> lk(mu_);
    if (!dirty_) {
      cJSON_Delete(root);
      return true;
    }
    cJSON_AddNumberToObject(root, "version", kLearnedVersion);
    cJSON_AddNumberToObject(root, "gap_s", gap_.s);
    cJSON_AddNumberToObject(root, "gap_count", static_cast<double>(gap_.count));
    cJSON_AddNumberToObject(root, "stage_s", stage_.s);
    cJSON_AddNumberToObject(root, "stage_count", static_cast<double>(stage_.count));
    cJSON* nodes = cJSON_AddArrayToObject(root, "graph_nodes");
    for (const auto& [k, g] : node_cells_) {
      cJSON* gn = cJSON_CreateObject();
      add_graph_key(gn, k);
      cJSON* fs = cJSON_AddArrayToObject(gn, "factors");
      cJSON* ns = cJSON_AddArrayToObject(gn, "counts");
      for (const Cell& c : g.cells) {
        // An empty cell is written as count 0, which loads as empty.
        cJSON_AddItemToArray(fs, cJSON_CreateNumber(std::exp(c.log_factor)));
        cJSON_AddItemToArray(ns, cJSON_CreateNumber(static_cast<double>(c.count)));
      }
      cJSON_AddItemToArray(nodes, gn);
    }
    cJSON* graphs = cJSON_AddArrayToObject(root, "graph_gaps");
    for (const auto& [k, v] : graph_gap_) {
      cJSON* gg = cJSON_CreateObject();
      add_graph_key(gg, k);
      cJSON_AddNumberToObject(gg, "gap_s", v.s);
      cJSON_AddNumberToObject(gg, "count", static_cast<double>(v.count));
      cJSON_AddItemToArray(graphs, gg);
    }
    cJSON* cells = cJSON_AddArrayToObject(root, "cells");
    for (const auto& [k, cell] : cells_) {
      cJSON* c = cJSON_CreateObject();
      cJSON_AddStringToObject(c, "op", op_class_name(static_cast<OpCode>(k >> 8)));
      cJSON_AddNumberToObject(c, "bucket", static_cast<double>(k & 0xff));
      cJSON_AddNumberToObject(c, "factor", std::exp(cell.log_factor));
      cJSON_AddNumberToObject(c, "count", static_cast<double>(cell.count));
      cJSON_AddItemToArray(cells, c);
    }
    dirty_ = false;
  }
  char* text = cJSON_Print(root);
  cJSON_Delete(root);
  const bool ok = text && write_text_file(file_, std::string(text) + "\n");
  cJSON_free(text);
  if (!ok) {
    std::unique_lock<std::shared_mutex> lk(mu_);
    dirty_ = true;  // tried again at the next save
  }
  return ok;
}

}  // namespace genie::sched
